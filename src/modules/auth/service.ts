import type { Sql } from "../../db/postgres";
import { sha256Hex } from "../../lib/ids";
import { unauthorized } from "../../lib/errors";

export interface Principal {
  organizationId: string;
  kind: "api_key" | "oauth";
  apiKeyId: string | null;
  userId: string | null;
}

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
