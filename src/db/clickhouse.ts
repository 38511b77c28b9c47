import { createClient, type ClickHouseClient } from "@clickhouse/client";
import { createChdbConnection } from "chdb/connection";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Config } from "../config";

export interface ClickHouseStore {
  client: ClickHouseClient;
  /** Database holding Vigil's tables; tests use one per suite on the shared chdb engine. */
  database: string;
  /** True for the in-process chdb engine. */
  embedded: boolean;
  /** Directory for staging files the embedded engine reads with file(). */
  stagingDir: string | null;
  close(): Promise<void>;
}

const settings = {
  output_format_json_quote_64bit_integers: 0,
  date_time_output_format: "iso",
} as const;

let sharedChdb: { path: string; client: ClickHouseClient; users: number } | null = null;

/**
 * `@clickhouse/client` against CLICKHOUSE_URL, or against chdb in `CHDB_PATH` (default `$DATA_DIR/ch`). chdb binds one
 * data directory per process, so every store opened in this process shares one engine.
 */
export function openClickHouse(config: Config): ClickHouseStore {
  const { clickhouse, dataDir, chdbPath: path } = config;
  if (clickhouse.url) {
    const client = createClient({
      url: clickhouse.url,
      username: clickhouse.user,
      password: clickhouse.password,
      clickhouse_settings: settings,
      max_open_connections: 20,
      request_timeout: 120_000,
    });
    return { client, database: clickhouse.database, embedded: false, stagingDir: null, close: () => client.close() };
  }
  if (sharedChdb && sharedChdb.path !== path) {
    throw new Error(`chdb is already open on ${sharedChdb.path}; one data directory per process`);
  }
  if (!sharedChdb) {
    mkdirSync(path, { recursive: true });
    const client = createClient({ connection: createChdbConnection({ path }) as never, clickhouse_settings: settings });
    sharedChdb = { path, client, users: 0 };
  }
  const engine = sharedChdb;
  engine.users++;
  const stagingDir = join(dataDir, "ch-staging");
  mkdirSync(stagingDir, { recursive: true });
  return {
    client: engine.client,
    database: clickhouse.database,
    embedded: true,
    stagingDir,
    async close() {
      if (--engine.users > 0) return;
      sharedChdb = null;
      await engine.client.close();
    },
  };
}
