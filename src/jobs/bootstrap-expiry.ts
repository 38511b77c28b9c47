import type { Context } from "../context";

type Stores = Pick<Context, "sql" | "ch" | "config" | "log">;

const batchSize = 50;

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
 * Deletes temporary organizations whose claim link expired unclaimed, with everything in them: their
 * ClickHouse rows first, then the organization, whose PostgreSQL rows cascade. Rows are locked with
 * SKIP LOCKED, so several processes can sweep at once and a claim racing the sweep either wins or
 * finds the organization gone. Returns the ids deleted.
 */
export async function deleteExpiredBootstrapOrganizations(stores: Stores): Promise<string[]> {
  const deleted: string[] = [];
  for (;;) {
    const batch = await stores.sql.begin(async (tx) => {
      const rows = await tx<{ id: string }[]>`
        SELECT o.id FROM bootstrap_claims c JOIN organizations o ON o.id = c.organization_id
        WHERE c.claimed_at IS NULL AND c.expires_at <= now() AND o.is_bootstrap AND o.claimed_at IS NULL
        ORDER BY c.expires_at
        LIMIT ${batchSize}
        FOR UPDATE OF o SKIP LOCKED`;
      const ids = rows.map((row) => row.id);
      if (ids.length === 0) return ids;
      await deleteClickHouseRows(stores, ids);
      await tx`DELETE FROM organizations WHERE id IN ${tx(ids)}`;
      return ids;
    });
    deleted.push(...batch);
    if (batch.length < batchSize) break;
  }
  if (deleted.length > 0) stores.log.info("deleted expired bootstrap organizations", { count: deleted.length, organizationIds: deleted });
  return deleted;
}
