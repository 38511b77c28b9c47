import type { Sql } from "../../db/postgres";
import { sha256Hex } from "../../lib/ids";
import { unauthorized } from "../../lib/errors";

export interface Principal {
  organizationId: string;
  kind: "api_key" | "oauth";
  apiKeyId: string | null;
  userId: string | null;
  /** The OAuth grant (connected agent) behind an access token. */
  oauthGrantId?: string;
}

/** Access tokens carry this prefix, so a lookup goes to the right table. */
export const oauthAccessTokenPrefix = "vgloat";

/** Cached credentials expire quickly so a revocation by another process bites within 5 seconds. */
const cacheTtlMs = 2_000;
const lastUsedWriteEveryMs = 60_000;

export class AuthService {
  private cache = new Map<string, { principal: Principal | null; expiresAt: number }>();
  private lastUsedWritten = new Map<string, number>();

  constructor(private sql: Sql) {}

  /** Resolves `Authorization: Bearer <token>` to a principal, or throws 401. */
  async fromHeader(header: string | undefined | null): Promise<Principal> {
    const token = header?.match(/^Bearer\s+(\S+)\s*$/i)?.[1];
    if (!token) throw unauthorized("Missing bearer token");
    const principal = await this.resolveToken(token);
    if (!principal) throw unauthorized("Invalid or revoked credentials");
    return principal;
  }

  async resolveToken(token: string): Promise<Principal | null> {
    if (token.startsWith(oauthAccessTokenPrefix)) return this.resolveOAuthToken(token);
    // Lookup by SHA-256 digest: the comparison happens on a fixed-length hash inside an index, so
    // response time does not depend on how much of a guessed token was right.
    const hash = sha256Hex(token);
    const now = Date.now();
    const cached = this.cache.get(hash);
    if (cached && cached.expiresAt > now) return cached.principal;
    const [row] = await this.sql<{ id: string; organization_id: string }[]>`
      SELECT id, organization_id FROM api_keys WHERE token_hash = ${hash} AND revoked_at IS NULL`;
    const principal: Principal | null = row
      ? { organizationId: row.organization_id, kind: "api_key", apiKeyId: row.id, userId: null }
      : null;
    if (this.cache.size > 10_000) this.cache.clear();
    this.cache.set(hash, { principal, expiresAt: now + cacheTtlMs });
    if (row) this.touch(row.id, now);
    return principal;
  }

  /**
   * OAuth access tokens are never cached: every request reads the token and its grant, so a
   * revocation (console, API or RFC 7009) takes effect at once in every process. The grant's user
   * must still be a member of the organization it was granted for.
   */
  private async resolveOAuthToken(token: string): Promise<Principal | null> {
    const [row] = await this.sql<{ grant_id: string; organization_id: string; user_id: string }[]>`
      SELECT g.id AS grant_id, g.organization_id, g.user_id
      FROM oauth_tokens t JOIN oauth_grants g ON g.id = t.grant_id
      JOIN memberships m ON m.organization_id = g.organization_id AND m.user_id = g.user_id
      WHERE t.token_hash = ${sha256Hex(token)} AND t.kind = 'access' AND t.revoked_at IS NULL
        AND t.expires_at > now() AND g.revoked_at IS NULL`;
    if (!row) return null;
    const now = Date.now();
    if ((this.lastUsedWritten.get(row.grant_id) ?? 0) <= now - lastUsedWriteEveryMs) {
      this.lastUsedWritten.set(row.grant_id, now);
      this.sql`UPDATE oauth_grants SET last_used_at = now() WHERE id = ${row.grant_id}`.catch(() => {});
    }
    return { organizationId: row.organization_id, kind: "oauth", apiKeyId: null, userId: row.user_id, oauthGrantId: row.grant_id };
  }

  /** Forget cached credentials after a revocation in this process. */
  invalidate() {
    this.cache.clear();
  }

  private touch(apiKeyId: string, now: number) {
    if ((this.lastUsedWritten.get(apiKeyId) ?? 0) > now - lastUsedWriteEveryMs) return;
    this.lastUsedWritten.set(apiKeyId, now);
    this.sql`UPDATE api_keys SET last_used_at = now() WHERE id = ${apiKeyId}`.catch(() => {});
  }
}
