import type { AuthorizationCode, AuthorizationCodeModel, Client, RefreshToken, RefreshTokenModel, Token, User } from "@node-oauth/oauth2-server";
import type { Sql } from "../db/postgres";
import { newId, newToken, sha256Hex } from "../lib/ids";
import { oauthAccessTokenPrefix } from "../modules/auth/service";
import { revokeGrant } from "../modules/oauth-keys/service";
import type { OAuthClients } from "./clients";

export const supportedScopes = ["openid", "profile", "email", "offline_access"] as const;
export const defaultScope = ["openid", "profile", "email"];
export const accessTokenLifetimeSeconds = 3600;
export const refreshTokenLifetimeSeconds = 30 * 86_400;
export const authorizationCodeLifetimeSeconds = 600;

/** What the consent decision hands the library as its "user": who, for which organization and resource. */
export interface GrantingUser extends User {
  id: string;
  organizationId: string;
  resource: string | null;
  /** Set once a grant exists (codes and tokens read back from storage). */
  grantId?: string;
}

const grantTypes = ["authorization_code", "refresh_token"];
const libraryClient = (client: { id: string; redirectUris: string[] }): Client => ({ id: client.id, redirectUris: client.redirectUris, grants: grantTypes });
const scopeText = (scope: string[] | undefined) => (scope ?? defaultScope).join(" ");
const scopeList = (scope: string) => scope.split(" ").filter(Boolean);

/**
 * The storage side of `@node-oauth/oauth2-server` on PostgreSQL. The library runs the protocol
 * (parameter checks, PKCE verification, expiry, redirect_uri and client binding, response shapes);
 * this model stores only digests of codes and tokens and adds what OAuth 2.1 asks beyond it:
 * a reused code or a reused (rotated) refresh token revokes the whole grant, and refresh tokens
 * exist only with `offline_access`.
 */
export function createOAuthModel(sql: Sql, clients: OAuthClients): AuthorizationCodeModel & RefreshTokenModel {
  return {
    async getClient(clientId: string) {
      const client = await clients.find(clientId);
      return client ? libraryClient(client) : false;
    },

    async validateScope(_user: User, _client: Client, scope?: string[]) {
      const requested = scope && scope.length > 0 ? scope : defaultScope;
      return requested.every((item) => (supportedScopes as readonly string[]).includes(item)) ? [...new Set(requested)] : false;
    },

    async generateAuthorizationCode() {
      return newToken("vglcode");
    },
    async generateAccessToken() {
      return newToken(oauthAccessTokenPrefix);
    },
    async generateRefreshToken() {
      return newToken("vglort");
    },

    /** The consent creates the grant (the "OAuth key") and its first code together. */
    async saveAuthorizationCode(code: Pick<AuthorizationCode, "authorizationCode" | "expiresAt" | "redirectUri" | "scope" | "codeChallenge" | "codeChallengeMethod">, client: Client, user: User) {
      const granting = user as GrantingUser;
      const grantId = newId();
      await sql.begin(async (tx) => {
        await tx`
          INSERT INTO oauth_grants (id, client_id, user_id, organization_id, scope, resource)
          VALUES (${grantId}, ${client.id}, ${granting.id}, ${granting.organizationId}, ${scopeText(code.scope)}, ${granting.resource})`;
        await tx`
          INSERT INTO oauth_codes (code_hash, grant_id, redirect_uri, code_challenge, code_challenge_method, scope, expires_at)
          VALUES (${sha256Hex(code.authorizationCode)}, ${grantId}, ${code.redirectUri}, ${code.codeChallenge ?? ""}, ${code.codeChallengeMethod ?? ""},
            ${scopeText(code.scope)}, ${code.expiresAt})`;
        await tx`UPDATE oauth_clients SET authorized_at = coalesce(authorized_at, now()) WHERE id = ${client.id}`;
      });
      return { ...code, client, user: { ...granting, grantId } };
    },

    /** A code already used is a replay: the grant it started is revoked with every token issued. */
    async getAuthorizationCode(authorizationCode: string) {
      const [row] = await sql<
        {
          grant_id: string;
          client_id: string;
          user_id: string;
          organization_id: string;
          resource: string | null;
          redirect_uri: string;
          code_challenge: string;
          code_challenge_method: string;
          scope: string;
          expires_at: Date;
          used_at: Date | null;
          revoked_at: Date | null;
        }[]
      >`
        SELECT c.grant_id, g.client_id, g.user_id, g.organization_id, g.resource, c.redirect_uri, c.code_challenge, c.code_challenge_method,
          c.scope, c.expires_at, c.used_at, g.revoked_at
        FROM oauth_codes c JOIN oauth_grants g ON g.id = c.grant_id WHERE c.code_hash = ${sha256Hex(authorizationCode)}`;
      if (!row) return false;
      if (row.used_at) {
        await revokeGrant(sql, row.grant_id);
        return false;
      }
      if (row.revoked_at) return false;
      const client = await clients.find(row.client_id);
      if (!client) return false;
      const user: GrantingUser = { id: row.user_id, organizationId: row.organization_id, resource: row.resource, grantId: row.grant_id };
      return {
        authorizationCode,
        expiresAt: row.expires_at,
        redirectUri: row.redirect_uri,
        scope: scopeList(row.scope),
        client: libraryClient(client),
        user,
        codeChallenge: row.code_challenge,
        codeChallengeMethod: row.code_challenge_method,
      };
    },

    /** Single use, atomically: of two concurrent exchanges only one marks the code; the other's grant is revoked. */
    async revokeAuthorizationCode(code: AuthorizationCode) {
      const marked = await sql`UPDATE oauth_codes SET used_at = now() WHERE code_hash = ${sha256Hex(code.authorizationCode)} AND used_at IS NULL`;
      if (marked.count === 0) await revokeGrant(sql, (code.user as GrantingUser).grantId!);
      return marked.count > 0;
    },

    async saveToken(token: Token, client: Client, user: User) {
      const granting = user as GrantingUser;
      const scope = scopeText(token.scope);
      const withRefresh = token.scope?.includes("offline_access") && token.refreshToken;
      await sql.begin(async (tx) => {
        const [grant] = await tx`SELECT 1 FROM oauth_grants WHERE id = ${granting.grantId!} AND revoked_at IS NULL FOR UPDATE`;
        if (!grant) throw new Error("grant revoked while its token was being issued");
        await tx`
          INSERT INTO oauth_tokens (token_hash, kind, grant_id, scope, expires_at)
          VALUES (${sha256Hex(token.accessToken)}, 'access', ${granting.grantId!}, ${scope}, ${token.accessTokenExpiresAt!})`;
        if (withRefresh) {
          await tx`
            INSERT INTO oauth_tokens (token_hash, kind, grant_id, scope, expires_at)
            VALUES (${sha256Hex(token.refreshToken!)}, 'refresh', ${granting.grantId!}, ${scope}, ${token.refreshTokenExpiresAt!})`;
        }
      });
      return {
        accessToken: token.accessToken,
        accessTokenExpiresAt: token.accessTokenExpiresAt,
        ...(withRefresh ? { refreshToken: token.refreshToken, refreshTokenExpiresAt: token.refreshTokenExpiresAt } : {}),
        scope: token.scope,
        client,
        user,
      };
    },

    /** A refresh token already rotated (or revoked) coming back means it leaked: the whole grant goes. */
    async getRefreshToken(refreshToken: string) {
      const [row] = await sql<
        { grant_id: string; client_id: string; user_id: string; organization_id: string; resource: string | null; scope: string; expires_at: Date; revoked_at: Date | null; grant_revoked_at: Date | null }[]
      >`
        SELECT t.grant_id, g.client_id, g.user_id, g.organization_id, g.resource, t.scope, t.expires_at, t.revoked_at, g.revoked_at AS grant_revoked_at
        FROM oauth_tokens t JOIN oauth_grants g ON g.id = t.grant_id WHERE t.token_hash = ${sha256Hex(refreshToken)} AND t.kind = 'refresh'`;
      if (!row) return false;
      if (row.revoked_at && !row.grant_revoked_at) await revokeGrant(sql, row.grant_id);
      if (row.revoked_at || row.grant_revoked_at) return false;
      const client = await clients.find(row.client_id);
      if (!client) return false;
      const user: GrantingUser = { id: row.user_id, organizationId: row.organization_id, resource: row.resource, grantId: row.grant_id };
      return { refreshToken, refreshTokenExpiresAt: row.expires_at, scope: scopeList(row.scope), client: libraryClient(client), user };
    },

    /** Rotation: the used refresh token is revoked; losing a race to another use counts as reuse. */
    async revokeToken(token: RefreshToken | Token) {
      const marked = await sql`
        UPDATE oauth_tokens SET revoked_at = now() WHERE token_hash = ${sha256Hex(token.refreshToken!)} AND kind = 'refresh' AND revoked_at IS NULL`;
      if (marked.count === 0) await revokeGrant(sql, (token.user as GrantingUser).grantId!);
      return marked.count > 0;
    },

    // The library's authenticate() is not used: bearer tokens go through AuthService for every route.
    async getAccessToken() {
      return false;
    },
  } as unknown as AuthorizationCodeModel & RefreshTokenModel;
}
