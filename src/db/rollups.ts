import type { ClickHouseStore } from "./clickhouse";

/** Which spans' roll-ups to recompute; every bound left out widens it. */
export interface RollupScope {
  organizationId?: string;
  projectId?: string;
  /** On the spans' start time, inclusive. */
  from?: Date;
  to?: Date;
}

export interface RebuiltRollup {
  table: string;
  /** Roll-up rows (traces, sessions, …) recomputed. */
  rows: number;
}

type Store = Pick<ClickHouseStore, "client" | "database">;

interface RollupView {
  name: string;
  target: string;
  /** The view's SELECT over `spans`, as ClickHouse keeps it. */
  select: string;
  /** The target's sort key: the view's GROUP BY, columns of `spans` too. */
  key: string;
}

async function rollupViews(store: Store): Promise<RollupView[]> {
  const result = await store.client.query({
    query: `SELECT view.name AS name, view.as_select AS select, view.create_table_query AS ddl, target.name AS target, target.sorting_key AS key
            FROM system.tables AS view
            JOIN system.tables AS target ON target.database = view.database
              AND view.create_table_query LIKE concat('% TO ', view.database, '.', target.name, ' %')
            WHERE view.database = {database:String} AND view.engine = 'MaterializedView' AND view.as_select LIKE concat('% FROM ', view.database, '.spans%')
            ORDER BY name`,
    query_params: { database: store.database },
    format: "JSONEachRow",
  });
  return result.json<RollupView>();
}

/** Key columns of a roll-up that are not columns of `spans`, as the view computes them from a span. */
const computedKeys: Record<string, Record<string, string>> = {
  analytics_hourly: { hour: "toStartOfHour(toDateTime(start_time, 'UTC'))" },
};

/** The roll-up's key as expressions over `spans`. */
const spanKey = (view: RollupView) =>
  view.key
    .split(",")
    .map((column) => computedKeys[view.target]?.[column.trim()] ?? column.trim())
    .join(", ");

const dateTime = (date: Date) => date.toISOString().replace("T", " ").replace("Z", "");

/**
 * Recomputes from `spans` every roll-up that a materialized view over `spans` feeds (`traces`, `sessions`, and any
 * later one), for the keys (trace, session, …) that have a span in the scope: their rows are deleted and written
 * again from all their spans, each span once. Idempotent. Each view's own SELECT does the work, so a roll-up
 * rebuilt here is the one ingest writes.
 */
export async function rebuildRollups(store: Store, scope: RollupScope): Promise<RebuiltRollup[]> {
  const { client, database } = store;
  const conditions = ["1"];
  const params: Record<string, string> = {};
  if (scope.organizationId !== undefined) conditions.push("organization_id = {organizationId:String}"), (params.organizationId = scope.organizationId);
  if (scope.projectId !== undefined) conditions.push("project_id = {projectId:String}"), (params.projectId = scope.projectId);
  if (scope.from) conditions.push("start_time >= toDateTime64({from:String}, 9, 'UTC')"), (params.from = dateTime(scope.from));
  if (scope.to) conditions.push("start_time <= toDateTime64({to:String}, 9, 'UTC')"), (params.to = dateTime(scope.to));
  const inScope = conditions.join(" AND ");
  const rebuilt: RebuiltRollup[] = [];
  for (const view of await rollupViews(store)) {
    const key = spanKey(view);
    const keys = `(SELECT DISTINCT ${key} FROM ${database}.spans WHERE ${inScope})`;
    const spansOfKeys = `(SELECT * FROM ${database}.spans WHERE (${key}) IN ${keys} LIMIT 1 BY organization_id, project_id, trace_id, span_id)`;
    const source = `FROM ${database}.spans`;
    if (view.select.split(source).length !== 2) throw new Error(`${database}.${view.name} does not read ${database}.spans once; rebuild ${view.target} by hand`);
    await client.command({ query: `DELETE FROM ${database}.${view.target} WHERE (${view.key}) IN ${keys}`, query_params: params });
    // Without deduplication: a block equal to one inserted before (an earlier rebuild) must still be written.
    await client.command({
      query: `INSERT INTO ${database}.${view.target} SETTINGS insert_deduplicate = 0 ${view.select.replace(source, `FROM ${spansOfKeys}`)}`,
      query_params: params,
    });
    const counted = await client.query({ query: `SELECT count() AS rows FROM ${keys}`, query_params: params, format: "JSONEachRow" });
    rebuilt.push({ table: view.target, rows: Number((await counted.json<{ rows: number }>())[0]?.rows ?? 0) });
  }
  return rebuilt;
}
