import type { Sql } from "../../db/postgres";
import { HttpError, notFound } from "../../lib/errors";
import type { Actor } from "../members/service";
import type { OAuthKey } from "./model";

interface GrantRow {
  id: string;
  client_id: string;
  client_name: string | null;
  client_icon: string | null;
  user_id: string;
  user_name: string | null;
  user_email: string;
  last_used_at: Date | null;
  created_at: Date;
  revoked_at: Date | null;
}

const toOAuthKey = (row: GrantRow): OAuthKey => ({
  id: row.id,
  clientId: row.client_id,
  clientName: row.client_name,
  clientIcon: row.client_icon,
  userId: row.user_id,
  userName: row.user_name,
  userEmail: row.user_email,
  lastActivityAt: row.last_used_at?.toISOString() ?? null,
  connectedAt: row.created_at.toISOString(),
  disabled: row.revoked_at !== null,
});

/** The organization's connected agents: its OAuth grants. */
export class OAuthKeysService {
  constructor(private sql: Sql) {}

  private select(organizationId: string, grantId: string | null) {
    return this.sql<GrantRow[]>`
      SELECT g.id, g.client_id, c.name AS client_name, c.icon AS client_icon, g.user_id, u.name AS user_name, u.email AS user_email,
        g.last_used_at, g.created_at, g.revoked_at
      FROM oauth_grants g JOIN oauth_clients c ON c.id = g.client_id JOIN users u ON u.id = g.user_id
      WHERE g.organization_id = ${organizationId} ${grantId === null ? this.sql`` : this.sql`AND g.id = ${grantId}`}
      ORDER BY g.created_at DESC, g.id DESC`;
  }

  async list(organizationId: string): Promise<OAuthKey[]> {
    return (await this.select(organizationId, null)).map(toOAuthKey);
  }

  async get(organizationId: string, grantId: string): Promise<OAuthKey> {
    const [row] = await this.select(organizationId, grantId);
    if (!row) throw notFound("OAuth key");
    return toOAuthKey(row);
  }

  /**
   * Revokes the grant and every token issued under it. Token checks read the grant from PostgreSQL on
   * each request, so every Vigil process refuses its tokens from the next request on. A member
   * revokes their own agents; owners, admins and API keys revoke anyone's.
   */
  async revoke(actor: Actor, organizationId: string, grantId: string): Promise<void> {
    const key = await this.get(organizationId, grantId);
    if (actor.role === "member" && key.userId !== actor.userId) throw new HttpError(403, "Members revoke only their own OAuth keys");
    await revokeGrant(this.sql, grantId);
  }
}

export async function revokeGrant(sql: Sql, grantId: string): Promise<void> {
  await sql.begin(async (tx) => {
    await tx`UPDATE oauth_grants SET revoked_at = coalesce(revoked_at, now()) WHERE id = ${grantId}`;
    await tx`UPDATE oauth_tokens SET revoked_at = coalesce(revoked_at, now()) WHERE grant_id = ${grantId}`;
  });
}
