import type { Sql } from "../db/postgres";

/**
 * Expired sessions, reset links, codes and tokens, and clients registered a day ago and never
 * authorized (registration is open, so unused registrations must not pile up).
 */
export async function purgeExpiredPeopleAndOAuth(sql: Sql): Promise<void> {
  await sql`DELETE FROM sessions WHERE expires_at < now()`;
  await sql`DELETE FROM password_resets WHERE expires_at < now() - interval '1 day'`;
  await sql`DELETE FROM oauth_codes WHERE expires_at < now() - interval '1 day'`;
  await sql`DELETE FROM oauth_tokens WHERE expires_at < now() - interval '1 day'`;
  await sql`DELETE FROM oauth_clients WHERE authorized_at IS NULL AND created_at < now() - interval '1 day'`;
}
