import type { Config } from "../../config";
import type { Queryable, Sql } from "../../db/postgres";
import { badRequest, notFound, tooManyRequests } from "../../lib/errors";
import { addMembership, checkEmail, userWithPassword } from "../../web/people";
import { newId, newToken, sha256Hex, slugify } from "../../lib/ids";
import type { Logger } from "../../lib/log";
import type { Mailer } from "../../lib/mailer";
import { clientAddressKey, type RateLimiter } from "../../lib/rate-limit";
import { requiredName } from "../../lib/validation";
import { issueApiKey } from "../api-keys/service";
import type { Principal } from "../auth/service";
import { insertProject } from "../projects/service";
import type { AccountResponse, BootstrapAccountBody, BootstrapAccountResponse, Role } from "./model";

const claimValidity = "7 days";
const bootstrapWindowSeconds = 3600;

export type ClaimStatus = "open" | "claimed" | "expired";

export interface ClaimView {
  status: ClaimStatus;
  organizationName: string;
  email: string | null;
  expiresAt: Date;
}

export type ClaimOutcome = { claimed: true; organizationName: string; organizationId: string; userId: string } | { claimed: false; view: ClaimView | null };

/** Inserts a bootstrap organization under a free slug: the name's, or with a random suffix when taken. */
async function insertBootstrapOrganization(sql: Queryable, name: string): Promise<{ id: string; slug: string }> {
  const base = slugify(name, "organization");
  for (let attempt = 0; attempt < 10; attempt++) {
    const slug = attempt === 0 ? base : `${base}-${newId().slice(-6)}`;
    const [row] = await sql<{ id: string; slug: string }[]>`
      INSERT INTO organizations (id, name, slug, is_bootstrap) VALUES (${newId()}, ${name}, ${slug}, true)
      ON CONFLICT (slug) DO NOTHING
      RETURNING id, slug`;
    if (row) return row;
  }
  throw new Error("could not find a free organization slug");
}

export class AccountService {
  constructor(
    private sql: Sql,
    private config: Pick<Config, "publicUrl" | "bootstrapRateLimitPerHour">,
    private mailer: Mailer,
    private limiter: RateLimiter,
    private log: Logger,
  ) {}

  /**
   * A temporary organization with a project, an API key and a claim link valid for seven days.
   * Nobody owns it until someone claims it; the expiry job deletes it otherwise.
   */
  async bootstrap(body: BootstrapAccountBody, clientAddress: string | null): Promise<BootstrapAccountResponse> {
    const limit = await this.limiter.hit(`bootstrap:${clientAddressKey(clientAddress)}`, this.config.bootstrapRateLimitPerHour, bootstrapWindowSeconds);
    if (!limit.allowed) throw tooManyRequests(limit.retryAfterSeconds, "Too many accounts created from this address; try again later");
    const organizationName = requiredName("organizationName", body.organizationName ?? "My Organization");
    const projectName = requiredName("projectName", body.projectName ?? "My Project");
    const email = body.userEmail?.trim() || null;
    const claimToken = newToken("vglclaim");
    const created = await this.sql.begin(async (tx) => {
      const organization = await insertBootstrapOrganization(tx, organizationName);
      const project = await insertProject(tx, organization.id, projectName);
      const apiKey = await issueApiKey(tx, organization.id, "Bootstrap key");
      const [claim] = await tx<{ expires_at: Date }[]>`
        INSERT INTO bootstrap_claims (token_hash, organization_id, email, expires_at)
        VALUES (${sha256Hex(claimToken)}, ${organization.id}, ${email}, now() + ${claimValidity}::interval)
        RETURNING expires_at`;
      return { organization, project, apiKey, expiresAt: claim!.expires_at };
    });
    const claimUrl = `${this.config.publicUrl}/claim/${claimToken}`;
    if (email) {
      // The response already carries the link, so a slow or failing mail server must not fail the request.
      this.mailer
        .sendMail({
          to: email,
          subject: `Claim your Vigil organization: ${organizationName}`,
          text: [
            `A temporary Vigil organization, "${organizationName}", was created for this address (often by an AI agent working for you).`,
            "",
            `Open this link to take ownership of it:`,
            claimUrl,
            "",
            `The link expires at ${created.expiresAt.toISOString()}. An organization not claimed by then is deleted with all its data.`,
            "If you did not expect this message, you can ignore it.",
          ].join("\n"),
        })
        .catch((error: Error) => this.log.error("claim email not sent", { organizationId: created.organization.id, error }));
    }
    this.log.info("bootstrap organization created", { organizationId: created.organization.id, projectId: created.project.id });
    return {
      organizationSlug: created.organization.slug,
      projectSlug: created.project.slug,
      apiKey: created.apiKey.token,
      claimUrl,
      claimEmail: email,
      claimExpiresAt: created.expiresAt.toISOString(),
    };
  }

  /** Who the credential is. API keys belong to the organization, not to a user: no user and no role. */
  async account(principal: Principal): Promise<AccountResponse> {
    const [organization] = await this.sql<{ id: string; name: string; slug: string }[]>`
      SELECT id, name, slug FROM organizations WHERE id = ${principal.organizationId}`;
    if (!organization) throw notFound("Organization");
    if (!principal.userId) return { user: null, organization, role: null };
    const [member] = await this.sql<{ id: string; email: string; name: string | null; role: Role }[]>`
      SELECT u.id, u.email, u.name, m.role FROM memberships m JOIN users u ON u.id = m.user_id
      WHERE m.organization_id = ${organization.id} AND m.user_id = ${principal.userId}`;
    if (!member) return { user: null, organization, role: null };
    return { user: { id: member.id, email: member.email, name: member.name, image: null }, organization, role: member.role };
  }

  async claimView(token: string): Promise<ClaimView | null> {
    const [row] = await this.sql<{ name: string; email: string | null; expires_at: Date; claimed: boolean; expired: boolean }[]>`
      SELECT o.name, c.email, c.expires_at, c.claimed_at IS NOT NULL AS claimed, c.expires_at <= now() AS expired
      FROM bootstrap_claims c JOIN organizations o ON o.id = c.organization_id
      WHERE c.token_hash = ${sha256Hex(token)}`;
    if (!row) return null;
    const status: ClaimStatus = row.claimed ? "claimed" : row.expired ? "expired" : "open";
    return { status, organizationName: row.name, email: row.email, expiresAt: row.expires_at };
  }

  /**
   * Hands the organization to the person holding the link: their account (created with the password
   * on first claim, else checked against it) becomes its owner, the organization stops being
   * temporary and its expiry is cancelled. The link works once.
   */
  async claim(token: string, form: { email: string; name?: string; password: string }): Promise<ClaimOutcome> {
    const email = checkEmail(form.email);
    const name = form.name?.trim() ? requiredName("name", form.name) : null;
    const hash = sha256Hex(token);
    const claimed = await this.sql.begin(async (tx) => {
      // Locks the organization row before the claim row, the order the expiry job deletes them in.
      // The expiry is checked against the clock, not the transaction's start: a claim that waited
      // for the expiry job's lock must see that the link expired meanwhile.
      const [organization] = await tx<{ id: string; name: string }[]>`
        UPDATE organizations o SET claimed_at = now(), is_bootstrap = false, updated_at = now()
        FROM bootstrap_claims c
        WHERE c.token_hash = ${hash} AND o.id = c.organization_id
          AND c.claimed_at IS NULL AND c.expires_at > clock_timestamp() AND o.claimed_at IS NULL
        RETURNING o.id, o.name`;
      if (!organization) return null;
      await tx`UPDATE bootstrap_claims SET claimed_at = now() WHERE token_hash = ${hash}`;
      const userId = await userWithPassword(tx, email, form.password, name);
      await addMembership(tx, organization.id, userId, "owner");
      return { ...organization, userId };
    });
    if (claimed) {
      this.log.info("bootstrap organization claimed", { organizationId: claimed.id, userId: claimed.userId });
      return { claimed: true, organizationName: claimed.name, organizationId: claimed.id, userId: claimed.userId };
    }
    return { claimed: false, view: await this.claimView(token) };
  }

  /**
   * A new claim link for the caller's temporary organization, mailed to `email` (the agent_auth claim
   * endpoint). Earlier links stop working.
   */
  async reissueClaim(organizationId: string, rawEmail: string): Promise<{ claimEmail: string; claimExpiresAt: string }> {
    const email = checkEmail(rawEmail);
    const claimToken = newToken("vglclaim");
    const [claim] = await this.sql<{ expires_at: Date; name: string }[]>`
      UPDATE bootstrap_claims c SET token_hash = ${sha256Hex(claimToken)}, email = ${email}
      FROM organizations o
      WHERE c.organization_id = ${organizationId} AND o.id = c.organization_id AND c.claimed_at IS NULL AND c.expires_at > now()
      RETURNING c.expires_at, o.name`;
    if (!claim) throw badRequest("This organization has no open claim: it is already claimed or was never temporary");
    await this.mailer.sendMail({
      to: email,
      subject: `Claim your Vigil organization: ${claim.name}`,
      text: [`Open this link to take ownership of the Vigil organization "${claim.name}":`, `${this.config.publicUrl}/claim/${claimToken}`, "", `It expires at ${claim.expires_at.toISOString()}.`].join("\n"),
    });
    return { claimEmail: email, claimExpiresAt: claim.expires_at.toISOString() };
  }
}
