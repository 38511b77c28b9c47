import type { Config } from "./config";
import type { ClickHouseStore } from "./db/clickhouse";
import type { Sql } from "./db/postgres";
import type { Logger } from "./lib/log";
import type { AuthService } from "./modules/auth/service";

/** What every module is built from: configuration, the two stores, a logger and shared services. */
export interface Context {
  config: Config;
  sql: Sql;
  ch: ClickHouseStore;
  log: Logger;
  auth: AuthService;
  /** Registers work to finish during graceful shutdown, run in reverse order of registration. */
  onShutdown(task: () => Promise<void> | void): void;
}
