import type { Queryable, Sql } from "../../db/postgres";
import { notFound } from "../../lib/errors";
import { newId, newToken, sha256Hex } from "../../lib/ids";
import { requiredName } from "../../lib/validation";
import type { AuthService } from "../auth/service";
import type { ApiKey, ApiKeyListItem } from "./model";

interface ApiKeyRow {
  id: string;
  organization_id: string;
  name: string;
  token_prefix: string;
  last_used_at: Date | null;
  revoked_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

/** Characters of a token kept in clear for display: `vgl_` and 8 of its 43 random characters. */
const displayPrefixLength = 12;

const columns = (sql: Queryable) =>
  sql`id, organization_id, name, token_prefix, last_used_at, revoked_at, created_at,
      greatest(created_at, last_used_at, revoked_at, renamed_at) AS updated_at`;

const isoOrNull = (date: Date | null) => (date ? date.toISOString() : null);

function toListItem(row: ApiKeyRow): ApiKeyListItem {
  return {
    id: row.id,
    organizationId: row.organization_id,
    name: row.name,
    token: `${row.token_prefix}…`,
    lastUsedAt: isoOrNull(row.last_used_at),
    deletedAt: isoOrNull(row.revoked_at),
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

/** Creates an API key of the organization; the returned token exists nowhere else. */
export async function issueApiKey(sql: Queryable, organizationId: string, name: string, createdByUserId: string | null = null): Promise<ApiKey> {
  const token = newToken("vgl");
  const [row] = await sql<ApiKeyRow[]>`
    INSERT INTO api_keys (id, organization_id, name, token_hash, token_prefix, created_by_user_id)
    VALUES (${newId()}, ${organizationId}, ${requiredName("name", name)}, ${sha256Hex(token)}, ${token.slice(0, displayPrefixLength)}, ${createdByUserId})
    RETURNING ${columns(sql)}`;
  return { ...toListItem(row!), token };
}

export class ApiKeysService {
  constructor(
    private sql: Sql,
    private auth: AuthService,
  ) {}

  create(organizationId: string, name: string, createdByUserId: string | null): Promise<ApiKey> {
    return issueApiKey(this.sql, organizationId, name, createdByUserId);
  }

  /** Every key of the organization, revoked ones included (with `deletedAt`), newest first. */
  async list(organizationId: string): Promise<ApiKeyListItem[]> {
    const rows = await this.sql<ApiKeyRow[]>`
      SELECT ${columns(this.sql)} FROM api_keys WHERE organization_id = ${organizationId} ORDER BY created_at DESC, id DESC`;
    return rows.map(toListItem);
  }

  async get(organizationId: string, apiKeyId: string): Promise<ApiKeyListItem> {
    const [row] = await this.sql<ApiKeyRow[]>`
      SELECT ${columns(this.sql)} FROM api_keys WHERE id = ${apiKeyId} AND organization_id = ${organizationId}`;
    if (!row) throw notFound("API key");
    return toListItem(row);
  }

  /** Renames a key, revoked or not; its token stays the same. */
  async rename(organizationId: string, apiKeyId: string, name: string): Promise<ApiKeyListItem> {
    const [row] = await this.sql<ApiKeyRow[]>`
      UPDATE api_keys SET name = ${requiredName("name", name)}, renamed_at = now() WHERE id = ${apiKeyId} AND organization_id = ${organizationId}
      RETURNING ${columns(this.sql)}`;
    if (!row) throw notFound("API key");
    return toListItem(row);
  }

  /** Revokes a key (again revoking is a no-op); it stops authenticating in this process at once. */
  async revoke(organizationId: string, apiKeyId: string): Promise<void> {
    const result = await this.sql`
      UPDATE api_keys SET revoked_at = coalesce(revoked_at, now()) WHERE id = ${apiKeyId} AND organization_id = ${organizationId}`;
    if (result.count === 0) throw notFound("API key");
    this.auth.invalidate();
  }
}
