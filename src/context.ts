import type { Config } from "./config";
import type { ClickHouseStore } from "./db/clickhouse";
import type { Sql } from "./db/postgres";
import type { IngestPipeline } from "./ingest/pipeline";
import type { SpanWriter } from "./ingest/write";
import type { Boss } from "./jobs/boss";
import type { Logger } from "./lib/log";
import type { AuthService } from "./modules/auth/service";
import type { RedactionPolicies } from "./ingest/redaction-policy";

/** What every module is built from: configuration, the two stores, a logger and shared services. */
export interface Context {
  config: Config;
  sql: Sql;
  ch: ClickHouseStore;
  log: Logger;
  auth: AuthService;
  /** Effective redaction per project, cached; settings changes invalidate it. */
  redaction: RedactionPolicies;
  /** Batch → write: where ingested span rows go; `accept` resolves once they are durable. */
  spanWriter: SpanWriter;
  /** Decode → map → redact → price → batch, shared by the OTLP HTTP and gRPC receivers. */
  ingest: IngestPipeline;
  /** pg-boss: background work the fleet shares (queues, schedules, retries, singletons); see src/jobs/. */
  boss: Boss;
  /** Registers work to finish during graceful shutdown, run in reverse order of registration. */
  onShutdown(task: () => Promise<void> | void): void;
}
