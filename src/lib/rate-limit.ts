import type { Sql } from "../db/postgres";

export interface RateLimitResult {
  allowed: boolean;
  /** Hits counted in the current window, this one included. */
  count: number;
  /** When the current window ends (Unix seconds). */
  resetAt: number;
  /** Seconds until the current window ends and the count starts over. */
  retryAfterSeconds: number;
}

/** Longest window a limit may use; counters idle longer than this are purged. */
const maxWindowSeconds = 86_400;

/**
 * Fixed-window counters in the `rate_limits` table, so every Vigil process on the same database
 * counts against one limit. Windows are aligned on the database clock and each hit is one atomic
 * upsert, so concurrent requests can neither skip the count nor reset a window twice.
 */
export class RateLimiter {
  constructor(private sql: Sql) {}

  async hit(key: string, limit: number, windowSeconds: number): Promise<RateLimitResult> {
    if (windowSeconds > maxWindowSeconds) throw new Error(`rate-limit windows are at most ${maxWindowSeconds} s`);
    const [row] = await this.sql<{ count: number; retry_after: number; reset_at: number }[]>`
      INSERT INTO rate_limits AS r (key, window_start, count)
      VALUES (${key}, to_timestamp(floor(extract(epoch FROM now()) / ${windowSeconds}::int) * ${windowSeconds}::int), 1)
      ON CONFLICT (key) DO UPDATE SET
        count = CASE WHEN r.window_start >= excluded.window_start THEN r.count + 1 ELSE 1 END,
        window_start = greatest(r.window_start, excluded.window_start)
      RETURNING count, extract(epoch FROM window_start + make_interval(secs => ${windowSeconds}::int) - now())::float8 AS retry_after,
        extract(epoch FROM window_start + make_interval(secs => ${windowSeconds}::int))::float8 AS reset_at`;
    return { allowed: row!.count <= limit, count: row!.count, resetAt: Math.ceil(row!.reset_at), retryAfterSeconds: Math.max(1, Math.ceil(row!.retry_after)) };
  }

  /** Drops counters whose window ended long ago; a background job calls this. */
  async purgeExpired(): Promise<number> {
    const result = await this.sql`DELETE FROM rate_limits WHERE window_start < now() - make_interval(secs => ${maxWindowSeconds}::int)`;
    return result.count;
  }
}

/**
 * The rate-limit identity of a client address: IPv4 as is, IPv6 by its /64 prefix, since one
 * subscriber usually holds a whole /64 and could otherwise rotate through it.
 */
export function clientAddressKey(address: string | null | undefined): string {
  if (!address) return "unknown";
  const plain = address.replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/i, "").replace(/%.*$/, "");
  if (!plain.includes(":")) return plain;
  const [head = "", tail] = plain.split("::");
  const left = head ? head.split(":") : [];
  const right = tail ? tail.split(":") : [];
  const groups = [...left, ...Array<string>(Math.max(0, 8 - left.length - right.length)).fill("0"), ...right];
  return `${groups
    .slice(0, 4)
    .map((group) => parseInt(group, 16).toString(16))
    .join(":")}::/64`;
}
