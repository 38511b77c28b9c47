import { randomBytes } from "node:crypto";
import type { Sql } from "../../db/postgres";
import { sha256Hex } from "../../lib/ids";
import type { Mailer } from "../../lib/mailer";

/** A confirmation link is mailed again at most this often per address, so a request cannot flood an inbox. */
const resendMinutes = 60;
const linkValidDays = 7;

/**
 * Confirmed email addresses: mail with data goes only to an address whose owner opened the link
 * mailed to it. Any organization may trigger the mail, but no more than once per `resendMinutes`.
 */
export class EmailConfirmations {
  constructor(
    private readonly sql: Sql,
    private readonly mailer: Mailer,
    private readonly config: { publicUrl: string },
  ) {}

  async isConfirmed(email: string): Promise<boolean> {
    const [row] = await this.sql<{ confirmed: boolean }[]>`
      SELECT confirmed_at IS NOT NULL AS confirmed FROM email_confirmations WHERE email = ${email.toLowerCase()}`;
    return row?.confirmed ?? false;
  }

  /** Mails a confirmation link to the address, unless it is confirmed or a link went out within `resendMinutes`. */
  async requestConfirmation(email: string): Promise<void> {
    const token = randomBytes(32).toString("base64url");
    const [claimed] = await this.sql<{ email: string }[]>`
      INSERT INTO email_confirmations AS c (email, token_hash, sent_at) VALUES (${email.toLowerCase()}, ${sha256Hex(token)}, now())
      ON CONFLICT (email) DO UPDATE SET token_hash = excluded.token_hash, sent_at = excluded.sent_at
      WHERE c.confirmed_at IS NULL AND (c.sent_at IS NULL OR c.sent_at < now() - make_interval(mins => ${resendMinutes}))
      RETURNING email`;
    if (!claimed) return;
    await this.mailer.sendMail({
      to: email,
      subject: "Confirm your email address for Vigil",
      text: `Someone asked Vigil to send data to this address. Open this link to confirm it is yours:\n\n${this.confirmUrl(token)}\n\nIf that was not you, ignore this mail: nothing is sent until the address is confirmed. The link works for ${linkValidDays} days.\n`,
    });
  }

  confirmUrl(token: string): string {
    return `${this.config.publicUrl}/v1/email-confirmations/confirm?token=${encodeURIComponent(token)}`;
  }

  /** Whether the token is a live link (not yet used, not expired). */
  async isPending(token: string): Promise<boolean> {
    const [row] = await this.sql`
      SELECT 1 FROM email_confirmations
      WHERE token_hash = ${sha256Hex(token)} AND confirmed_at IS NULL AND sent_at > now() - make_interval(days => ${linkValidDays})`;
    return Boolean(row);
  }

  /** Confirms the address the token was mailed to; false for an unknown, used or expired token. */
  async confirm(token: string): Promise<boolean> {
    const rows = await this.sql`
      UPDATE email_confirmations SET confirmed_at = now(), token_hash = NULL
      WHERE token_hash = ${sha256Hex(token)} AND confirmed_at IS NULL AND sent_at > now() - make_interval(days => ${linkValidDays})
      RETURNING email`;
    return rows.length > 0;
  }
}
