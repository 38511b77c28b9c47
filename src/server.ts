import type { Config } from "./config";
import type { Context } from "./context";
import { createApp } from "./app";
import { startJobs } from "./jobs";
import { startBoss, type Boss } from "./jobs/boss";
import { openClickHouse } from "./db/clickhouse";
import { migrateClickHouse, migratePostgres } from "./db/migrate";
import { openPostgres } from "./db/postgres";
import { lockDataDir } from "./db/data-dir";
import { spanWriterOptions, startSpanWriter, type SpanWriter } from "./ingest/write";
import { createLogger, type Logger } from "./lib/log";
import { AuthService } from "./modules/auth/service";
import { RedactionPolicies } from "./ingest/redaction-policy";
import { IngestPipeline } from "./ingest/pipeline";
import { LogIngest } from "./ingest/logs";
import { startGrpcReceiver } from "./ingest/grpc";
import { encodeExportResponse } from "./ingest/respond";

/** The HTTP or gRPC listener could not be opened with the configured address and port. */
export class ListenError extends Error {}

export interface Vigil {
  ctx: Context;
  url: string;
  port: number;
  stop(): Promise<void>;
}

/** Opens the stores, applies migrations, serves every route and starts background work. */
export async function startVigil(config: Config, log: Logger = createLogger(config.logLevel)): Promise<Vigil> {
  const started = performance.now();
  const unlockDataDir = await lockDataDir(config.dataDir);
  const pg = await openPostgres(config.databaseUrl, config.dataDir, log);
  const ch = openClickHouse(config);
  const shutdownTasks: (() => Promise<void> | void)[] = [];
  let spanWriter: SpanWriter;
  let boss: Boss;
  try {
    await migratePostgres(pg.sql, log);
    await migrateClickHouse(ch, config.clickhouse.cluster, log);
    spanWriter = await startSpanWriter(spanWriterOptions(config, ch, log));
    boss = await startBoss(pg.url, log);
  } catch (error) {
    await ch.close();
    await pg.close();
    unlockDataDir();
    throw error;
  }
  const auth = new AuthService(pg.sql);
  const redaction = new RedactionPolicies(pg.sql, { pseudonymSecret: config.pseudonymSecret });
  const ctx: Context = {
    config,
    sql: pg.sql,
    ch,
    log,
    auth,
    redaction,
    spanWriter,
    boss,
    ingest: new IngestPipeline(auth, pg.sql, redaction, spanWriter, new LogIngest(ch), config.ingest.maxConcurrentExports, log, config.ingest),
    onShutdown: (task) => shutdownTasks.push(task),
  };
  // Registered first, so it runs last: after the receivers stop, before the stores close.
  ctx.onShutdown(() => spanWriter.close());
  // Next to last: jobs in progress finish before the span writer flushes and the stores close.
  ctx.onShutdown(() => boss.stop({ graceful: true, timeout: 10_000 }));
  const app = createApp(ctx);
  let stopping: Promise<void> | null = null;
  const stop = () =>
    (stopping ??= (async () => {
      log.info("shutting down");
      await app.server?.stop(false);
      for (const task of shutdownTasks.reverse()) {
        try {
          await task();
        } catch (error) {
          log.error("shutdown task failed", { error: error as Error });
        }
      }
      await ch.close();
      await pg.close();
      unlockDataDir();
      log.info("stopped");
    })());
  // A port in use or an address not on this machine: close what is open, then say which setting failed.
  const listen = async <T>(setting: string, open: () => T | Promise<T>): Promise<T> => {
    try {
      return await open();
    } catch (error) {
      await stop();
      throw new ListenError(`cannot listen on ${setting}: ${(error as Error).message}`);
    }
  };
  // Before the listener opens, so /health answers only once Vigil has started whole.
  try {
    await startJobs(ctx);
  } catch (error) {
    await stop();
    throw error;
  }
  await listen(`HOST=${config.host} PORT=${config.port}`, () =>
    app.listen({
      port: config.port,
      hostname: config.host,
      // Elysia turns SO_REUSEPORT on; a second server on a busy port must fail, not share it silently.
      reusePort: false,
      // Bun's own limit answers an empty 413: bodies are limited by Vigil instead (src/lib/body-limit.ts),
      // with a 413 `{error}` before they are read, and while they are read where they may be chunked.
      maxRequestBodySize: Number.MAX_SAFE_INTEGER,
    }),
  );
  if (config.otlpGrpcPort !== 0) {
    const grpc = await listen(`HOST=${config.host} OTLP_GRPC_PORT=${config.otlpGrpcPort}`, () =>
      startGrpcReceiver(
        config.otlpGrpcPort,
        config.host,
        config.ingest.maxBodyBytes,
        (authorization) => ctx.ingest.owner(authorization),
        async (bytes, headers, signal) =>
          encodeExportResponse(await ctx.ingest.export({ ...headers, announcedBytes: bytes.byteLength }, async () => ({ encoding: "protobuf", bytes }), signal)),
        log,
      ),
    );
    ctx.onShutdown(grpc.stop);
    log.info("otlp grpc receiver started", { port: grpc.port });
  }
  const port = app.server!.port!;
  if (!config.publicUrlConfigured) config.publicUrl = `http://localhost:${port}`;
  log.info("vigil started", { port, host: config.host, ms: Math.round(performance.now() - started) });

  return { ctx, url: `http://127.0.0.1:${port}`, port, stop };
}
