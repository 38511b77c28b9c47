import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { ClickHouseStore } from "./clickhouse";
import type { Sql } from "./postgres";
import { sha256Hex } from "../lib/ids";
import type { Logger } from "../lib/log";

const sqlRoot = join(import.meta.dir, "..", "..", "sql");

export interface MigrationFile {
  name: string;
  text: string;
  checksum: string;
}

export class MigrationError extends Error {}

export function readMigrations(kind: "postgres" | "clickhouse", dir = join(sqlRoot, kind)): MigrationFile[] {
  return readdirSync(dir)
    .filter((file) => file.endsWith(".sql"))
    .sort()
    .map((name) => {
      const text = readFileSync(join(dir, name), "utf8");
      return { name, text, checksum: sha256Hex(text) };
    });
}

/** Splits a file on semicolons that end a line; statements here never contain such a semicolon inside. */
export function splitStatements(text: string): string[] {
  return text
    .split(/;\s*$/m)
    .map((statement) => statement.replace(/^\s*--.*$/gm, "").trim())
    .filter(Boolean);
}

function assertUnchanged(file: MigrationFile, applied: Map<string, string>): boolean {
  const checksum = applied.get(file.name);
  if (checksum === undefined) return false;
  if (checksum !== file.checksum) {
    throw new MigrationError(`migration ${file.name} was changed after it was applied (checksum mismatch); add a new file instead`);
  }
  return true;
}

export async function migratePostgres(sql: Sql, log: Logger, files = readMigrations("postgres")): Promise<void> {
  await sql.begin(async (tx) => {
    // One migrator at a time across processes sharing the database.
    await tx`SELECT pg_advisory_xact_lock(728164)`;
    await tx`CREATE TABLE IF NOT EXISTS schema_migrations (name text PRIMARY KEY, checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`;
    const rows = await tx<{ name: string; checksum: string }[]>`SELECT name, checksum FROM schema_migrations`;
    const applied = new Map(rows.map((row) => [row.name, row.checksum]));
    for (const file of files) {
      if (assertUnchanged(file, applied)) continue;
      await tx.unsafe(file.text);
      await tx`INSERT INTO schema_migrations (name, checksum) VALUES (${file.name}, ${file.checksum})`;
      log.info("applied postgres migration", { migration: file.name });
    }
  });
}

const engineCall = /ENGINE\s*=\s*(Replacing|Summing|Aggregating|Collapsing|VersionedCollapsing)?MergeTree(?:\(([^)]*)\))?/gi;
const ddlHead = /^(\s*(?:CREATE|ALTER|DROP|RENAME|TRUNCATE)\s+(?:TABLE|DATABASE|MATERIALIZED\s+VIEW|VIEW|DICTIONARY)\s+(?:IF\s+(?:NOT\s+)?EXISTS\s+)?[\w.`{}]+)/i;

/**
 * Rewrites one statement for a cluster: `ON CLUSTER` after the object name and Replicated*
 * engines keyed by shard and replica macros. Statements without DDL heads pass through.
 */
export function clusterStatement(statement: string, cluster: string): string {
  let out = statement.replace(ddlHead, `$1 ON CLUSTER ${cluster}`);
  out = out.replace(engineCall, (_match, family: string | undefined, args: string | undefined) => {
    const path = `'/clickhouse/tables/{shard}/{database}/{table}', '{replica}'`;
    const rest = args && args.trim() ? `, ${args.trim()}` : "";
    return `ENGINE = Replicated${family ?? ""}MergeTree(${path}${rest})`;
  });
  return out;
}

export function renderClickHouseStatements(file: MigrationFile, database: string, cluster: string | null): string[] {
  return splitStatements(file.text.replaceAll("{{db}}", database)).map((statement) =>
    cluster ? clusterStatement(statement, cluster) : statement,
  );
}

const viewQueryChange = /^\s*ALTER\s+TABLE\s+([\w.`]+)(\s+ON\s+CLUSTER\s+\S+)?\s+MODIFY\s+QUERY\b/i;

/**
 * After `ALTER TABLE <view> MODIFY QUERY`, ClickHouse names the view by its UUID in the deduplication tokens of the
 * blocks it writes, until the view is loaded again, where every later start names it `database.view`. A segment
 * inserted by this process and replayed after a restart would then not be recognised in the view's table and be
 * counted twice; detaching and attaching the view loads it as a restart would.
 */
async function reloadViewAfterQueryChange(store: ClickHouseStore, statement: string): Promise<void> {
  const match = viewQueryChange.exec(statement);
  if (!match) return;
  const [, view, onCluster = ""] = match;
  await store.client.command({ query: `DETACH TABLE ${view}${onCluster}` });
  await store.client.command({ query: `ATTACH TABLE ${view}${onCluster}` });
}

export async function migrateClickHouse(store: ClickHouseStore, cluster: string | null, log: Logger, files = readMigrations("clickhouse")): Promise<void> {
  const { client, database } = store;
  const onCluster = cluster ? ` ON CLUSTER ${cluster}` : "";
  const engine = cluster ? `ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}')` : "ReplacingMergeTree";
  await client.command({ query: `CREATE DATABASE IF NOT EXISTS ${database}${onCluster}` });
  await client.command({
    query: `CREATE TABLE IF NOT EXISTS ${database}.schema_migrations${onCluster} (name String, checksum String, applied_at DateTime64(3) DEFAULT now64(3)) ENGINE = ${engine} ORDER BY name`,
  });
  const result = await client.query({ query: `SELECT name, checksum FROM ${database}.schema_migrations FINAL`, format: "JSONEachRow" });
  const applied = new Map((await result.json<{ name: string; checksum: string }>()).map((row) => [row.name, row.checksum]));
  for (const file of files) {
    if (assertUnchanged(file, applied)) continue;
    // Each statement is written to be re-runnable (IF NOT EXISTS), so a crash mid-file is safe to retry.
    for (const statement of renderClickHouseStatements(file, database, cluster)) {
      await client.command({ query: statement });
      await reloadViewAfterQueryChange(store, statement);
    }
    await client.insert({ table: `${database}.schema_migrations`, values: [{ name: file.name, checksum: file.checksum }], format: "JSONEachRow" });
    log.info("applied clickhouse migration", { migration: file.name });
  }
}
