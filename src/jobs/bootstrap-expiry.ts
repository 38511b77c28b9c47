import { rm } from "node:fs/promises";
import type { Context } from "../context";
import type { Queryable } from "../db/postgres";
import { exportFiles } from "../modules/traces/export";

type Stores = Pick<Context, "sql" | "ch" | "config" | "log">;

const batchSize = 50;

/**
 * How long an expired organization's keys stay revoked before its data is deleted. Every process
 * caches a credential for 2 s, and spans accepted until then sit in the span writer's write-ahead
 * log until its next flush (INGEST_FLUSH_MS, at most a minute); deleting earlier could miss them.
 */
export const revocationGraceSeconds = 60;

/** Matches expired claims of organizations still unclaimed (`c` and `o` in the query). */
const expiredUnclaimed = (sql: Queryable) =>
  sql`c.claimed_at IS NULL AND c.expires_at <= now() AND o.is_bootstrap AND o.claimed_at IS NULL`;

/** ClickHouse tables holding rows per organization: every MergeTree table with an `organization_id` column. */
async function organizationTables({ ch }: Stores): Promise<string[]> {
  const result = await ch.client.query({
    query: `SELECT DISTINCT c.table AS name FROM system.columns c
            JOIN system.tables t ON t.database = c.database AND t.name = c.table
            WHERE c.database = {database:String} AND c.name = 'organization_id' AND t.engine LIKE '%MergeTree'`,
    query_params: { database: ch.database },
    format: "JSONEachRow",
  });
  return (await result.json<{ name: string }>()).map((row) => row.name);
}

async function deleteClickHouseRows(stores: Stores, organizationIds: string[]): Promise<void> {
  const { ch, config } = stores;
  const onCluster = config.clickhouse.cluster ? ` ON CLUSTER ${config.clickhouse.cluster}` : "";
  for (const table of await organizationTables(stores)) {
    await ch.client.command({
      query: `ALTER TABLE ${ch.database}.\`${table.replaceAll("`", "\\`")}\`${onCluster} DELETE WHERE organization_id IN {ids:Array(String)}`,
      query_params: { ids: organizationIds },
      clickhouse_settings: { mutations_sync: "1" },
    });
  }
}

/**
 * Revokes the keys of organizations whose claim link expired, so nothing more is ingested for them.
 * The organization row is touched too: a claim waiting on its lock then re-checks the expiry, and
 * fails, rather than claiming an organization whose keys were just revoked.
 */
async function revokeKeysOfExpiredOrganizations({ sql }: Stores): Promise<void> {
  await sql`
    WITH expired AS (
      UPDATE organizations o SET updated_at = now()
      FROM bootstrap_claims c
      WHERE c.organization_id = o.id AND ${expiredUnclaimed(sql)}
        AND EXISTS (SELECT 1 FROM api_keys k WHERE k.organization_id = o.id AND k.revoked_at IS NULL)
      RETURNING o.id)
    UPDATE api_keys SET revoked_at = now() WHERE revoked_at IS NULL AND organization_id IN (SELECT id FROM expired)`;
}


/**
 * Deletes temporary organizations whose claim link expired unclaimed, with everything in them, in two
 * steps: first their keys are revoked; in a later round, once every key has been revoked for
 * `graceSeconds`, their ClickHouse rows are deleted, then the organization, whose PostgreSQL rows
 * cascade, then its export files. Rows are locked with SKIP LOCKED, so several processes can sweep at
 * once. Returns the ids deleted.
 *
 * Spans still arrive after the delete only when a span writer could not flush for longer than the
 * grace (ClickHouse unreachable, or a process killed and restarted later, replaying its write-ahead
 * log): those rows stay in ClickHouse under an organization id that no longer exists.
 */
export async function deleteExpiredBootstrapOrganizations(stores: Stores, graceSeconds = revocationGraceSeconds): Promise<string[]> {
  await revokeKeysOfExpiredOrganizations(stores);
  const deleted: string[] = [];
  const exportIds: string[] = [];
  for (;;) {
    const batch = await stores.sql.begin(async (tx) => {
      const rows = await tx<{ id: string }[]>`
        SELECT o.id FROM bootstrap_claims c JOIN organizations o ON o.id = c.organization_id
        WHERE ${expiredUnclaimed(tx)}
          AND NOT EXISTS (
            SELECT 1 FROM api_keys k WHERE k.organization_id = o.id
              AND (k.revoked_at IS NULL OR k.revoked_at > now() - make_interval(secs => ${graceSeconds})))
        ORDER BY c.expires_at
        LIMIT ${batchSize}
        FOR UPDATE OF o SKIP LOCKED`;
      const ids = rows.map((row) => row.id);
      if (ids.length === 0) return { ids, exportIds: [] };
      const exports = await tx<{ id: string }[]>`SELECT id FROM trace_exports WHERE organization_id IN ${tx(ids)}`;
      await deleteClickHouseRows(stores, ids);
      await tx`DELETE FROM organizations WHERE id IN ${tx(ids)}`;
      return { ids, exportIds: exports.map((row) => row.id) };
    });
    deleted.push(...batch.ids);
    exportIds.push(...batch.exportIds);
    if (batch.ids.length < batchSize) break;
  }
  for (const id of exportIds) for (const file of Object.values(exportFiles(stores.config.dataDir, id))) await rm(file, { force: true });
  if (deleted.length > 0) stores.log.info("deleted expired bootstrap organizations", { count: deleted.length, organizationIds: deleted });
  return deleted;
}
