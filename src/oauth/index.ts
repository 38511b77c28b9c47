import OAuth2Server, { OAuthError, Request as OAuthRequest, Response as OAuthResponse } from "@node-oauth/oauth2-server";
import { Elysia, t } from "elysia";
import type { Context } from "../context";
import { HttpError } from "../lib/errors";
import { sha256Hex } from "../lib/ids";
import { clientAddress } from "../lib/net";
import { clientAddressKey, RateLimiter } from "../lib/rate-limit";
import { revokeGrant } from "../modules/oauth-keys/service";
import { createCsrf, createSessions, htmlPages, loginRedirect, pageHeaders } from "../web";
import { MessagePage } from "../web/pages";
import type { People, SessionUser } from "../web/people";
import { checkRegistration, ClientMetadataError, OAuthClients, type OAuthClient } from "./clients";
import { ConsentPage } from "./consent";
import {
  accessTokenLifetimeSeconds,
  authorizationCodeLifetimeSeconds,
  createOAuthModel,
  defaultScope,
  refreshTokenLifetimeSeconds,
  supportedScopes,
  type GrantingUser,
} from "./model";

const authorizeParams = ["response_type", "client_id", "redirect_uri", "scope", "state", "code_challenge", "code_challenge_method", "resource"] as const;
type AuthorizeParams = Partial<Record<(typeof authorizeParams)[number], string>>;

/** Authorization-server metadata (RFC 8414) with the `agent_auth` block of the spec. */
export function authorizationServerMetadata(publicUrl: string) {
  const credentialTypes = ["access_token", "refresh_token"];
  return {
    issuer: publicUrl,
    authorization_endpoint: `${publicUrl}/api/auth/mcp/authorize`,
    token_endpoint: `${publicUrl}/api/auth/mcp/token`,
    registration_endpoint: `${publicUrl}/api/auth/mcp/register`,
    revocation_endpoint: `${publicUrl}/api/auth/mcp/revoke`,
    userinfo_endpoint: `${publicUrl}/api/auth/mcp/userinfo`,
    scopes_supported: [...supportedScopes],
    response_types_supported: ["code"],
    response_modes_supported: ["query"],
    grant_types_supported: ["authorization_code", "refresh_token"],
    token_endpoint_auth_methods_supported: ["none"],
    revocation_endpoint_auth_methods_supported: ["none"],
    code_challenge_methods_supported: ["S256"],
    client_id_metadata_document_supported: true,
    service_documentation: `${publicUrl}/docs`,
    agent_auth: {
      register_uri: `${publicUrl}/v1/account/bootstrap`,
      claim_uri: `${publicUrl}/claim`,
      identity_endpoint: `${publicUrl}/v1/account`,
      claim_endpoint: `${publicUrl}/v1/account/claim`,
      identity_types_supported: ["anonymous", "service_auth"],
      credential_types_supported: {
        anonymous: credentialTypes,
        identity_assertion: { assertion_types_supported: ["verified_email"], credential_types: credentialTypes },
        service_auth: credentialTypes,
      },
    },
  };
}

const oauthErrorBody = (error: OAuthError) => ({ error: error.name, error_description: error.message });

/** Where an authorization error may be sent: the client's own, exactly registered redirect URI. */
function redirectWithError(redirectUri: string, error: string, description: string, state: string | undefined) {
  const url = new URL(redirectUri);
  url.searchParams.set("error", error);
  url.searchParams.set("error_description", description);
  if (state) url.searchParams.set("state", state);
  return url.toString();
}

/**
 * The OAuth 2.1 authorization server of spec §5. `@node-oauth/oauth2-server` handles the grants
 * (authorization_code with PKCE, refresh_token) over the PostgreSQL model in ./model.ts; Vigil adds
 * registration and metadata documents, the sign-in and consent pages, stricter authorize checks
 * (S256 required, resource bound to the grant), revocation and userinfo.
 */
export function oauthModule(ctx: Context, people: People) {
  const { sql, config, auth } = ctx;
  const clients = new OAuthClients(sql);
  const limiter = new RateLimiter(sql);
  const server = new OAuth2Server({
    model: createOAuthModel(sql, clients),
    accessTokenLifetime: accessTokenLifetimeSeconds,
    refreshTokenLifetime: refreshTokenLifetimeSeconds,
    authorizationCodeLifetime: authorizationCodeLifetimeSeconds,
    allowEmptyState: true,
    requireClientAuthentication: { authorization_code: false, refresh_token: false },
  });
  const sessions = createSessions(ctx, people);
  const csrf = createCsrf(sessions.secure);
  const metadata = () => authorizationServerMetadata(config.publicUrl);

  const errorPage = (set: { status?: number | string; headers: Record<string, string | number> }, message: string) => {
    set.status = 400;
    Object.assign(set.headers, pageHeaders);
    return MessagePage({ title: "This authorization request cannot continue", message });
  };

  /**
   * Checks an authorization request before anything is shown. Until the client and its exact
   * redirect URI are known, errors are a page; after that they go back to the client.
   */
  async function checkAuthorize(params: AuthorizeParams): Promise<{ client: OAuthClient; redirectUri: string } | { page: string } | { redirect: string }> {
    if (!params.client_id) return { page: "The request names no client (client_id is missing)." };
    const client = await clients.find(params.client_id);
    if (!client) return { page: "The client is not registered with Vigil, or its metadata document could not be used." };
    if (!params.redirect_uri || !client.redirectUris.includes(params.redirect_uri)) {
      return { page: "The redirect URI is missing or is not one the client registered, so Vigil will not send you there." };
    }
    const back = (error: string, description: string) => ({ redirect: redirectWithError(params.redirect_uri!, error, description, params.state) });
    if (params.response_type !== "code") return back("unsupported_response_type", "response_type must be code");
    if (!params.code_challenge) return back("invalid_request", "PKCE is required: code_challenge is missing");
    if (params.code_challenge_method !== "S256") return back("invalid_request", "code_challenge_method must be S256");
    if (!/^[A-Za-z0-9_-]{43,128}$/.test(params.code_challenge)) return back("invalid_request", "code_challenge is malformed");
    const scopes = params.scope ? params.scope.split(" ").filter(Boolean) : defaultScope;
    if (!scopes.every((scope) => (supportedScopes as readonly string[]).includes(scope))) return back("invalid_scope", `scope must be a subset of: ${supportedScopes.join(" ")}`);
    if (params.resource !== undefined) {
      const resourceOrigin = URL.canParse(params.resource) ? new URL(params.resource).origin : null;
      if (resourceOrigin !== new URL(config.publicUrl).origin) return back("invalid_target", "resource must be this Vigil's API or MCP endpoint");
    }
    return { client, redirectUri: params.redirect_uri };
  }

  const pickParams = (source: Record<string, unknown>): AuthorizeParams =>
    Object.fromEntries(authorizeParams.filter((name) => typeof source[name] === "string").map((name) => [name, source[name] as string]));

  return (
    new Elysia({ name: "oauth", detail: { tags: ["oauth"] } })
      .use(htmlPages)
      .get("/.well-known/oauth-authorization-server", metadata, { detail: { summary: "Authorization server metadata (RFC 8414)" } })
      .get("/api/auth/.well-known/oauth-authorization-server", metadata, { detail: { summary: "Authorization server metadata (RFC 8414), under /api/auth" } })
      .post(
        "/api/auth/mcp/register",
        async ({ body, request, server: http, set }) => {
          const address = clientAddress(http?.requestIP(request)?.address ?? null, request.headers.get("x-forwarded-for"), config.trustedProxies);
          const limit = await limiter.hit(`oauth-register:${clientAddressKey(address)}`, config.oauthRegistrationRateLimitPerHour, 3600);
          if (!limit.allowed) {
            // RFC 6749 error shape, as every other answer of the authorization server.
            set.status = 429;
            set.headers["retry-after"] = String(limit.retryAfterSeconds);
            return { error: "too_many_requests", error_description: "Too many client registrations from this address; try again later" };
          }
          let registration: ReturnType<typeof checkRegistration>;
          try {
            registration = checkRegistration((body ?? {}) as Record<string, unknown>);
          } catch (error) {
            if (!(error instanceof ClientMetadataError)) throw error;
            set.status = 400;
            return { error: error.code, error_description: error.message };
          }
          const { id, issuedAt } = await clients.register(registration);
          set.status = 201;
          set.headers["cache-control"] = "no-store";
          // A public client has no secret; RFC 7591 leaves client_secret out for it (the MCP SDK's schema rejects null).
          return {
            client_id: id,
            client_id_issued_at: issuedAt,
            client_name: registration.name ?? undefined,
            redirect_uris: registration.redirectUris,
            grant_types: registration.grantTypes,
            response_types: registration.responseTypes,
            token_endpoint_auth_method: "none",
            ...(registration.scope ? { scope: registration.scope } : {}),
          };
        },
        {
          body: t.Optional(t.Unknown()),
          detail: { summary: "Register a public OAuth client (RFC 7591)", description: "Rate limited per client address. Clients never authorized are removed after a day." },
        },
      )
      .get(
        "/api/auth/mcp/authorize",
        async ({ query, cookie, request, set, redirect }) => {
          const params = pickParams(query);
          const checked = await checkAuthorize(params);
          if ("page" in checked) return errorPage(set, checked.page);
          if ("redirect" in checked) return redirect(checked.redirect, 302);
          const session = await sessions.current(cookie);
          if (!session) return redirect(loginRedirect(request), 302);
          if (session.memberships.length === 0) return errorPage(set, "You are not a member of any organization, so there is nothing to grant.");
          Object.assign(set.headers, pageHeaders);
          return ConsentPage({
            session,
            csrf: csrf.token(cookie),
            clientName: checked.client.name ?? checked.client.id,
            redirectHost: new URL(checked.redirectUri).host || checked.redirectUri,
            scopes: params.scope ? params.scope.split(" ").filter(Boolean) : defaultScope,
            params: params as Record<string, string>,
          });
        },
        { detail: { summary: "Authorization endpoint", description: "Signs the user in, then shows the consent page." } },
      )
      .post(
        "/api/auth/mcp/authorize",
        async ({ body, cookie, request, set, redirect }) => {
          const form = body as Record<string, unknown>;
          csrf.check(cookie, request, form.csrf);
          const params = pickParams(form);
          const checked = await checkAuthorize(params);
          if ("page" in checked) return errorPage(set, checked.page);
          if ("redirect" in checked) return redirect(checked.redirect, 303);
          const session: SessionUser | null = await sessions.current(cookie);
          if (!session) return redirect(loginRedirect(request), 303);
          const organizationId = String(form.organization_id ?? "");
          if (form.decision === "allow" && !session.memberships.some((m) => m.id === organizationId)) {
            return errorPage(set, "Choose one of your organizations.");
          }
          const user: GrantingUser = { id: session.userId, organizationId, resource: params.resource ?? null };
          const response = new OAuthResponse();
          try {
            await server.authorize(
              new OAuthRequest({ method: "POST", query: params, headers: { "content-type": "application/x-www-form-urlencoded" }, body: { allowed: form.decision === "allow" ? "true" : "false" } }),
              response,
              { authenticateHandler: { handle: () => user } },
            );
          } catch (error) {
            // The library has put the error into a redirect to the client's checked redirect URI.
            if (!(error instanceof OAuthError) || !response.headers?.location) throw error;
          }
          return redirect(response.headers!.location!, 303);
        },
        { body: t.Record(t.String(), t.Unknown()), detail: { summary: "Consent decision", description: "Form post of the consent page." } },
      )
      .post(
        "/api/auth/mcp/token",
        async ({ body, request, query, set }) => {
          const response = new OAuthResponse();
          set.headers["cache-control"] = "no-store";
          set.headers.pragma = "no-cache";
          const grantType = (body as Record<string, string> | undefined)?.grant_type;
          // The library also knows password and client_credentials; Vigil offers neither.
          if (!grantType) {
            set.status = 400;
            return { error: "invalid_request", error_description: "grant_type is required" };
          }
          if (grantType !== "authorization_code" && grantType !== "refresh_token") {
            set.status = 400;
            return { error: "unsupported_grant_type", error_description: "grant_type must be authorization_code or refresh_token" };
          }
          try {
            await server.token(new OAuthRequest({ method: "POST", query, headers: Object.fromEntries(request.headers), body: body ?? {} }), response);
            return response.body;
          } catch (error) {
            if (!(error instanceof OAuthError)) throw error;
            set.status = error.code;
            if (error.code === 401) set.headers["www-authenticate"] = 'Bearer realm="vigil"';
            // RFC 6749 §5.2 names a redirect_uri that differs from the authorization request's invalid_grant; the library says invalid_request.
            if (error.name === "invalid_request" && error.message === "Invalid request: `redirect_uri` is invalid") return { error: "invalid_grant", error_description: error.message };
            return oauthErrorBody(error);
          }
        },
        {
          // The library reads the form and answers per RFC 6749 §5.2; any content type reaches it, so a JSON body is its invalid_request.
          parse: async ({ request, contentType }) =>
            contentType === "application/x-www-form-urlencoded" ? Object.fromEntries(new URLSearchParams(await request.text())) : (await request.text(), {}),
          detail: { summary: "Token endpoint", description: "Form-encoded: `authorization_code` (PKCE S256) and `refresh_token` (rotating) grants." },
        },
      )
      .post(
        "/api/auth/mcp/revoke",
        async ({ body, set }) => {
          set.headers["cache-control"] = "no-store";
          const form = (body ?? {}) as Record<string, string>;
          if (!form.token) {
            set.status = 400;
            return { error: "invalid_request", error_description: "token is required" };
          }
          const [row] = await sql<{ grant_id: string; kind: string; client_id: string }[]>`
            SELECT t.grant_id, t.kind, g.client_id FROM oauth_tokens t JOIN oauth_grants g ON g.id = t.grant_id WHERE t.token_hash = ${sha256Hex(form.token)}`;
          // RFC 7009: unknown tokens and another client's tokens are answered 200 without effect.
          if (row && (!form.client_id || form.client_id === row.client_id)) {
            if (row.kind === "refresh") await revokeGrant(sql, row.grant_id);
            else await sql`UPDATE oauth_tokens SET revoked_at = coalesce(revoked_at, now()) WHERE token_hash = ${sha256Hex(form.token)}`;
          }
          return {};
        },
        {
          parse: async ({ request }) => Object.fromEntries(new URLSearchParams(await request.text())),
          detail: { summary: "Revoke a token (RFC 7009)", description: "A refresh token revokes its whole grant; an access token itself only." },
        },
      )
      .get(
        "/api/auth/mcp/userinfo",
        async ({ request }) => {
          const principal = await auth.fromHeader(request.headers.get("authorization"));
          if (principal.kind !== "oauth") throw new HttpError(401, "userinfo needs an OAuth access token", { "WWW-Authenticate": 'Bearer error="invalid_token"' });
          const [row] = await sql<{ id: string; email: string; name: string | null; scope: string }[]>`
            SELECT u.id, u.email, u.name, g.scope FROM oauth_grants g JOIN users u ON u.id = g.user_id WHERE g.id = ${principal.oauthGrantId!}`;
          if (!row) throw new HttpError(401, "Invalid or revoked credentials", { "WWW-Authenticate": "Bearer" });
          const scopes = row.scope.split(" ");
          return {
            sub: row.id,
            ...(scopes.includes("email") ? { email: row.email } : {}),
            ...(scopes.includes("profile") ? { name: row.name } : {}),
            organization_id: principal.organizationId,
          };
        },
        { detail: { summary: "Who the access token's user is (OpenID Connect userinfo)" } },
      )
  );
}
