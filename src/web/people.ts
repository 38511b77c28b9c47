import type { Config } from "../config";
import type { Queryable, Sql } from "../db/postgres";
import { badRequest, tooManyRequests } from "../lib/errors";
import { newId, newToken, sha256Hex } from "../lib/ids";
import type { Logger } from "../lib/log";
import type { Mailer } from "../lib/mailer";
import { clientAddressKey, RateLimiter } from "../lib/rate-limit";
import { createMailer } from "../lib/mailer";
import type { Context } from "../context";
import type { Role } from "../modules/account/model";

/** Sessions last a fortnight from sign-in; there is no sliding renewal. */
const sessionDays = 14;
const resetValidity = "1 hour";
const loginWindowSeconds = 900;
/** Sign-in attempts per account in each 15-minute window; the per-address limit is configured. */
const signInsPerAccount = 10;

export const emailPattern = /^[^\s@\u0000]+@[^\s@\u0000]+\.[^\s@\u0000]+$/;

export interface SessionUser {
  tokenHash: string;
  userId: string;
  email: string;
  name: string | null;
  /** The organization the console shows, and the user's role in it; null without memberships. */
  organization: { id: string; name: string; slug: string; role: Role } | null;
  memberships: { id: string; name: string; role: Role }[];
}

export function checkEmail(raw: string): string {
  const email = raw.trim();
  if (!emailPattern.test(email) || email.length > 320) throw badRequest("email: must be an email address");
  return email;
}

export function checkPassword(password: string): string {
  if (password.length < 8) throw badRequest("password: must be at least 8 characters");
  if (password.length > 256) throw badRequest("password: must be at most 256 characters");
  return password;
}

export const hashPassword = (password: string) => Bun.password.hash(checkPassword(password), { algorithm: "argon2id" });

/**
 * The user with this email, created with the password when new. An existing user must give their
 * password (a user made without one, by an older claim, gets this one). Throws 400 on a wrong password.
 */
export async function userWithPassword(sql: Queryable, rawEmail: string, password: string, name: string | null): Promise<string> {
  const email = checkEmail(rawEmail);
  const [existing] = await sql<{ id: string; password_hash: string | null }[]>`
    SELECT id, password_hash FROM users WHERE lower(email) = lower(${email}) FOR UPDATE`;
  if (existing?.password_hash) {
    if (!(await Bun.password.verify(password, existing.password_hash))) throw badRequest("password: wrong password for this account");
    return existing.id;
  }
  const passwordHash = await hashPassword(password);
  if (existing) {
    await sql`UPDATE users SET password_hash = ${passwordHash}, name = coalesce(name, ${name}), updated_at = now() WHERE id = ${existing.id}`;
    return existing.id;
  }
  const [created] = await sql<{ id: string }[]>`
    INSERT INTO users (id, email, name, password_hash) VALUES (${newId()}, ${email}, ${name}, ${passwordHash}) RETURNING id`;
  return created!.id;
}

/** Adds the user to the organization with the role (an existing membership keeps its role). */
export async function addMembership(sql: Queryable, organizationId: string, userId: string, role: Role): Promise<void> {
  await sql`
    INSERT INTO memberships (id, organization_id, user_id, role) VALUES (${newId()}, ${organizationId}, ${userId}, ${role})
    ON CONFLICT (organization_id, user_id) DO NOTHING`;
}

export function createPeople(ctx: Context): People {
  const mailer = createMailer(ctx.config, ctx.log);
  ctx.onShutdown(() => mailer.drain());
  return new People(ctx.sql, ctx.config, mailer, new RateLimiter(ctx.sql), ctx.log);
}

/** Users, their sign-in sessions and password resets. */
export class People {
  constructor(
    private sql: Sql,
    private config: Pick<Config, "publicUrl" | "signInAddressRateLimit">,
    private mailer: Mailer,
    private limiter: RateLimiter,
    private log: Logger,
  ) {}

  /** A new session for the user; the returned token is the cookie value, stored only as a digest. */
  async startSession(userId: string, organizationId: string | null = null): Promise<{ token: string; maxAgeSeconds: number }> {
    const token = newToken("vglsess");
    await this.sql`
      INSERT INTO sessions (token_hash, user_id, organization_id, expires_at)
      VALUES (${sha256Hex(token)}, ${userId},
        coalesce(${organizationId}, (SELECT organization_id FROM memberships WHERE user_id = ${userId} ORDER BY created_at LIMIT 1)),
        now() + make_interval(days => ${sessionDays}))`;
    return { token, maxAgeSeconds: sessionDays * 86_400 };
  }

  /** The signed-in user behind a session cookie, or null when it is unknown or expired. */
  async session(token: string | undefined): Promise<SessionUser | null> {
    if (!token) return null;
    const tokenHash = sha256Hex(token);
    const [row] = await this.sql<{ user_id: string; email: string; name: string | null; organization_id: string | null }[]>`
      SELECT s.user_id, u.email, u.name, s.organization_id FROM sessions s JOIN users u ON u.id = s.user_id
      WHERE s.token_hash = ${tokenHash} AND s.expires_at > now()`;
    if (!row) return null;
    const memberships = await this.sql<{ id: string; name: string; slug: string; role: Role }[]>`
      SELECT o.id, o.name, o.slug, m.role FROM memberships m JOIN organizations o ON o.id = m.organization_id
      WHERE m.user_id = ${row.user_id} ORDER BY m.created_at, o.id`;
    const organization = memberships.find((m) => m.id === row.organization_id) ?? memberships[0] ?? null;
    return {
      tokenHash,
      userId: row.user_id,
      email: row.email,
      name: row.name,
      organization,
      memberships: memberships.map(({ id, name, role }) => ({ id, name, role })),
    };
  }

  async switchOrganization(session: SessionUser, organizationId: string): Promise<void> {
    if (!session.memberships.some((m) => m.id === organizationId)) throw badRequest("organization: not one of yours");
    await this.sql`UPDATE sessions SET organization_id = ${organizationId} WHERE token_hash = ${session.tokenHash}`;
  }

  async endSession(token: string | undefined): Promise<void> {
    if (token) await this.sql`DELETE FROM sessions WHERE token_hash = ${sha256Hex(token)}`;
  }

  /**
   * Checks an email and password, rate limited per account and per client address (every attempt
   * counts, so guessing is slow whichever way it is spread). Returns the user id, or null.
   */
  async signIn(rawEmail: string, password: string, clientAddress: string | null): Promise<string | null> {
    const email = rawEmail.trim().toLowerCase();
    for (const [key, limit] of [
      [`login:address:${clientAddressKey(clientAddress)}`, this.config.signInAddressRateLimit],
      [`login:account:${sha256Hex(email)}`, signInsPerAccount],
    ] as const) {
      const result = await this.limiter.hit(key, limit, loginWindowSeconds);
      if (!result.allowed) throw tooManyRequests(result.retryAfterSeconds, "Too many sign-in attempts; try again later");
    }
    const [user] = await this.sql<{ id: string; password_hash: string | null }[]>`
      SELECT id, password_hash FROM users WHERE lower(email) = ${email}`;
    // Without a user, verify against a throwaway hash anyway so timing does not tell who has an account.
    const ok = await Bun.password.verify(password, user?.password_hash ?? (await decoyHash));
    return user?.password_hash && ok ? user.id : null;
  }

  /** Mails a single-use reset link when the address has an account; says nothing either way. */
  async requestPasswordReset(rawEmail: string): Promise<void> {
    const email = checkEmail(rawEmail);
    const [user] = await this.sql<{ id: string; email: string }[]>`SELECT id, email FROM users WHERE lower(email) = lower(${email})`;
    if (!user) return;
    const token = newToken("vglreset");
    await this.sql`
      INSERT INTO password_resets (token_hash, user_id, expires_at) VALUES (${sha256Hex(token)}, ${user.id}, now() + ${resetValidity}::interval)`;
    const link = `${this.config.publicUrl}/password/reset/${token}`;
    this.mailer
      .sendMail({
        to: user.email,
        subject: "Reset your Vigil password",
        text: [`Open this link to choose a new password (valid for one hour, once):`, link, "", "If you did not ask for this, ignore this message."].join("\n"),
      })
      .catch((error: Error) => this.log.error("password reset email not sent", { userId: user.id, error }));
  }

  async resetIsOpen(token: string): Promise<boolean> {
    const [row] = await this.sql`
      SELECT 1 FROM password_resets WHERE token_hash = ${sha256Hex(token)} AND used_at IS NULL AND expires_at > now()`;
    return Boolean(row);
  }

  /** Sets the new password, uses up the link and ends every session of the user. Null when the link is spent. */
  async resetPassword(token: string, password: string): Promise<string | null> {
    const passwordHash = await hashPassword(password);
    return this.sql.begin(async (tx) => {
      const [reset] = await tx<{ user_id: string }[]>`
        UPDATE password_resets SET used_at = now()
        WHERE token_hash = ${sha256Hex(token)} AND used_at IS NULL AND expires_at > now() RETURNING user_id`;
      if (!reset) return null;
      await tx`UPDATE users SET password_hash = ${passwordHash}, updated_at = now() WHERE id = ${reset.user_id}`;
      await tx`DELETE FROM sessions WHERE user_id = ${reset.user_id}`;
      return reset.user_id;
    });
  }
}

const decoyHash = Bun.password.hash(newToken("decoy"), { algorithm: "argon2id" });
