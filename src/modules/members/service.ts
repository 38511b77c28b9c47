import type { Config } from "../../config";
import type { Queryable, Sql } from "../../db/postgres";
import { conflict, HttpError, notFound } from "../../lib/errors";
import { newId, newToken, sha256Hex } from "../../lib/ids";
import type { Logger } from "../../lib/log";
import type { Mailer } from "../../lib/mailer";
import { addMembership, checkEmail, userWithPassword } from "../../web/people";
import type { Role } from "../account/model";
import type { ActiveMember, InvitedMember } from "./model";

const invitationValidity = "7 days";

/**
 * Who acts: a user with their role in the organization, or an API key (`role: null`), which belongs
 * to the organization and may manage it.
 */
export interface Actor {
  userId: string | null;
  role: Role | null;
}

const forbidden = (message: string) => new HttpError(403, message);

function mayManage(actor: Actor) {
  if (actor.role === "member") throw forbidden("Only owners and admins manage members");
}

interface MemberRow {
  id: string;
  organization_id: string;
  user_id: string;
  role: Role;
  name: string | null;
  email: string;
  created_at: Date;
}

interface InvitationRow {
  id: string;
  organization_id: string;
  email: string;
  role: Role;
  inviter_id: string | null;
  created_at: Date;
  expires_at: Date;
}

const toActive = (row: MemberRow): ActiveMember => ({
  status: "active",
  id: row.id,
  organizationId: row.organization_id,
  userId: row.user_id,
  role: row.role,
  name: row.name,
  email: row.email,
  image: null,
  joinedAt: row.created_at.toISOString(),
});

const toInvited = (row: InvitationRow): InvitedMember => ({
  status: "invited",
  id: row.id,
  organizationId: row.organization_id,
  userId: null,
  role: row.role,
  name: null,
  email: row.email,
  image: null,
  invitedAt: row.created_at.toISOString(),
  expiresAt: row.expires_at.toISOString(),
  inviterId: row.inviter_id ?? "API",
});

export interface InvitationView {
  organizationName: string;
  email: string;
  role: Role;
  hasAccount: boolean;
}

/** Memberships and invitations of an organization. */
export class MembersService {
  constructor(
    private sql: Sql,
    private config: Pick<Config, "publicUrl">,
    private mailer: Mailer,
    private log: Logger,
  ) {}

  /** The role of a user in an organization, or null when not a member. */
  static async roleOf(sql: Sql, organizationId: string, userId: string): Promise<Role | null> {
    const [row] = await sql<{ role: Role }[]>`SELECT role FROM memberships WHERE organization_id = ${organizationId} AND user_id = ${userId}`;
    return row?.role ?? null;
  }

  /** Who a principal is, as an actor on members and keys. */
  async actorOf(principal: { organizationId: string; userId: string | null }): Promise<Actor> {
    return { userId: principal.userId, role: principal.userId ? await MembersService.roleOf(this.sql, principal.organizationId, principal.userId) : null };
  }

  async list(organizationId: string): Promise<(ActiveMember | InvitedMember)[]> {
    const active = await this.sql<MemberRow[]>`
      SELECT m.id, m.organization_id, m.user_id, m.role, u.name, u.email, m.created_at
      FROM memberships m JOIN users u ON u.id = m.user_id WHERE m.organization_id = ${organizationId} ORDER BY m.created_at, m.id`;
    const invited = await this.sql<InvitationRow[]>`
      SELECT id, organization_id, email, role, inviter_id, created_at, expires_at FROM invitations
      WHERE organization_id = ${organizationId} AND accepted_at IS NULL AND cancelled_at IS NULL AND expires_at > now()
      ORDER BY created_at, id`;
    return [...active.map(toActive), ...invited.map(toInvited)];
  }

  async get(organizationId: string, memberId: string): Promise<ActiveMember> {
    const [row] = await this.sql<MemberRow[]>`
      SELECT m.id, m.organization_id, m.user_id, m.role, u.name, u.email, m.created_at
      FROM memberships m JOIN users u ON u.id = m.user_id WHERE m.organization_id = ${organizationId} AND m.id = ${memberId}`;
    if (!row) throw notFound("Member");
    return toActive(row);
  }

  /** Invites by email and mails the accept link; a pending invitation to the same address is replaced. */
  async invite(actor: Actor, organizationId: string, body: { email: string; role?: Role }): Promise<InvitedMember> {
    mayManage(actor);
    const role = body.role ?? "member";
    if (role === "owner" && actor.role === "admin") throw forbidden("Only owners invite owners");
    const email = checkEmail(body.email);
    const token = newToken("vglinvite");
    const { row, organizationName } = await this.sql.begin(async (tx) => {
      const [member] = await tx`
        SELECT 1 FROM memberships m JOIN users u ON u.id = m.user_id WHERE m.organization_id = ${organizationId} AND lower(u.email) = lower(${email})`;
      if (member) throw conflict("This address already belongs to a member");
      await tx`
        UPDATE invitations SET cancelled_at = now()
        WHERE organization_id = ${organizationId} AND lower(email) = lower(${email}) AND accepted_at IS NULL AND cancelled_at IS NULL`;
      const [row] = await tx<InvitationRow[]>`
        INSERT INTO invitations (id, organization_id, email, role, token_hash, inviter_id, expires_at)
        VALUES (${newId()}, ${organizationId}, ${email}, ${role}, ${sha256Hex(token)}, ${actor.userId}, now() + ${invitationValidity}::interval)
        RETURNING id, organization_id, email, role, inviter_id, created_at, expires_at`;
      const [organization] = await tx<{ name: string }[]>`SELECT name FROM organizations WHERE id = ${organizationId}`;
      return { row: row!, organizationName: organization!.name };
    });
    const link = `${this.config.publicUrl}/invitations/${token}`;
    this.mailer
      .sendMail({
        to: email,
        subject: `You are invited to ${organizationName} on Vigil`,
        text: [`You are invited to join "${organizationName}" on Vigil as ${role}.`, "", "Open this link to accept:", link, "", `It expires at ${row.expires_at.toISOString()}.`].join("\n"),
      })
      .catch((error: Error) => this.log.error("invitation email not sent", { organizationId, error }));
    return toInvited(row);
  }

  /**
   * Changes a member's role. The organization's owners are locked first, so two concurrent changes
   * cannot both demote "the other" last owner.
   */
  async updateRole(actor: Actor, organizationId: string, memberId: string, role: Role): Promise<ActiveMember> {
    mayManage(actor);
    await this.sql.begin(async (tx) => {
      const target = await this.lockForChange(tx, organizationId, memberId);
      if (!target) throw notFound("Member");
      if (target.role === "owner" && actor.role === "admin") throw forbidden("Only owners change an owner's role");
      if (role === "owner" && actor.role === "admin") throw forbidden("Only owners make owners");
      if (target.role === "owner" && role !== "owner" && target.owners === 1) throw conflict("The last owner cannot be demoted");
      await tx`UPDATE memberships SET role = ${role} WHERE id = ${memberId}`;
    });
    return this.get(organizationId, memberId);
  }

  /** Removes a member (their OAuth grants in the organization stop working with the membership) or cancels an invitation. */
  async remove(actor: Actor, organizationId: string, memberId: string): Promise<void> {
    mayManage(actor);
    const removed = await this.sql.begin(async (tx) => {
      const target = await this.lockForChange(tx, organizationId, memberId);
      if (target) {
        if (target.role === "owner" && actor.role === "admin") throw forbidden("Only owners remove an owner");
        if (target.role === "owner" && target.owners === 1) throw conflict("The last owner cannot be removed");
        await tx`DELETE FROM memberships WHERE id = ${memberId}`;
        await tx`UPDATE oauth_grants SET revoked_at = coalesce(revoked_at, now()) WHERE organization_id = ${organizationId} AND user_id = ${target.user_id}`;
        await tx`UPDATE sessions SET organization_id = NULL WHERE user_id = ${target.user_id} AND organization_id = ${organizationId}`;
        return true;
      }
      const cancelled = await tx`
        UPDATE invitations SET cancelled_at = now()
        WHERE id = ${memberId} AND organization_id = ${organizationId} AND accepted_at IS NULL AND cancelled_at IS NULL`;
      return cancelled.count > 0;
    });
    if (!removed) throw notFound("Member");
  }

  private async lockForChange(tx: Queryable, organizationId: string, memberId: string) {
    const rows = await tx<{ id: string; user_id: string; role: Role }[]>`
      SELECT id, user_id, role FROM memberships WHERE organization_id = ${organizationId} ORDER BY id FOR UPDATE`;
    const target = rows.find((row) => row.id === memberId);
    return target ? { ...target, owners: rows.filter((row) => row.role === "owner").length } : null;
  }

  async invitation(token: string): Promise<InvitationView | null> {
    const [row] = await this.sql<{ name: string; email: string; role: Role; has_account: boolean }[]>`
      SELECT o.name, i.email, i.role, EXISTS (SELECT 1 FROM users u WHERE lower(u.email) = lower(i.email) AND u.password_hash IS NOT NULL) AS has_account
      FROM invitations i JOIN organizations o ON o.id = i.organization_id
      WHERE i.token_hash = ${sha256Hex(token)} AND i.accepted_at IS NULL AND i.cancelled_at IS NULL AND i.expires_at > now()`;
    return row ? { organizationName: row.name, email: row.email, role: row.role, hasAccount: row.has_account } : null;
  }

  /**
   * Accepts an invitation: the invited address's account (created with the password when new, else
   * checked against it) joins the organization. Single use. Returns the user and organization, or
   * null when the link is no longer valid.
   */
  async accept(token: string, password: string, name: string | null): Promise<{ userId: string; organizationId: string } | null> {
    return this.sql.begin(async (tx) => {
      const [invitation] = await tx<{ id: string; organization_id: string; email: string; role: Role }[]>`
        UPDATE invitations SET accepted_at = now()
        WHERE token_hash = ${sha256Hex(token)} AND accepted_at IS NULL AND cancelled_at IS NULL AND expires_at > now()
        RETURNING id, organization_id, email, role`;
      if (!invitation) return null;
      const userId = await userWithPassword(tx, invitation.email, password, name);
      await addMembership(tx, invitation.organization_id, userId, invitation.role);
      return { userId, organizationId: invitation.organization_id };
    });
  }
}
