import type { Sql } from "../db/postgres";
import { RateLimiter } from "../lib/rate-limit";
import { GatewayError } from "./errors";

/** Gateway requests per API key by the organization's plan (spec §8). */
export const planLimits = {
  hobby: { limit: 10, windowSeconds: 1 },
  team: { limit: 10_000, windowSeconds: 60 },
  enterprise: { limit: 30_000, windowSeconds: 60 },
} as const;
export type Plan = keyof typeof planLimits;

const planCacheMs = 5_000;

/**
 * Counts each gateway request against its key's window in PostgreSQL (shared by every process) and
 * answers the `X-RateLimit-*` headers; past the limit, a 429 with `Retry-After` as well.
 */
export class GatewayRateLimits {
  private plans = new Map<string, { plan: Plan; expiresAt: number }>();

  constructor(private sql: Sql) {}

  async check(organizationId: string, apiKeyId: string): Promise<Record<string, string>> {
    const { limit, windowSeconds } = planLimits[await this.plan(organizationId)];
    // A counter lost in a crash costs nothing: its commit does not wait for the disk.
    const hit = await this.sql.begin(async (tx) => {
      await tx`SET LOCAL synchronous_commit = off`;
      return new RateLimiter(tx as unknown as Sql).hit(`gateway:${apiKeyId}`, limit, windowSeconds);
    });
    const headers = {
      "X-RateLimit-Limit": String(limit),
      "X-RateLimit-Remaining": String(Math.max(0, limit - hit.count)),
      "X-RateLimit-Reset": String(hit.resetAt),
    };
    if (!hit.allowed) {
      throw new GatewayError(429, "RateLimitError", "RateLimitError", `Rate limit exceeded: ${limit} requests per ${windowSeconds === 1 ? "second" : `${windowSeconds} seconds`}`, undefined, {
        ...headers,
        "Retry-After": String(hit.retryAfterSeconds),
      });
    }
    return headers;
  }

  private async plan(organizationId: string): Promise<Plan> {
    const now = Date.now();
    const cached = this.plans.get(organizationId);
    if (cached && cached.expiresAt > now) return cached.plan;
    const [row] = await this.sql<{ plan: Plan }[]>`SELECT plan FROM organizations WHERE id = ${organizationId}`;
    const plan = row?.plan ?? "hobby";
    if (this.plans.size > 10_000) this.plans.clear();
    this.plans.set(organizationId, { plan, expiresAt: now + planCacheMs });
    return plan;
  }
}
