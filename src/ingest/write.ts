import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { join } from "node:path";
import { finished } from "node:stream/promises";
import type { Config, CrashPoint } from "../config";
import type { ClickHouseStore } from "../db/clickhouse";
import type { Logger } from "../lib/log";
import { SpanBatcher, type BatchLimits } from "./batch";
import type { SpanRow } from "./row";
import { completeRows, parseStructure, spanColumnList, spanColumns, spanStructure } from "./rowbinary";
import { spansStoredByOtherSegments } from "./span-keys";
import { Wal, type SealedSegment } from "./wal";

/** The batch → write stages as the receiver sees them. */
export interface SpanWriter {
  /**
   * Resolves once the rows are durable (fsynced in the write-ahead log, inserted into ClickHouse shortly after).
   * Rejects with BackpressureError when the queue is full or the writer is closing: nothing of the rows was kept.
   */
  accept(rows: readonly SpanRow[], approxBytes: number): Promise<void>;
  /** Throws BackpressureError when rows of about `approxBytes` would be refused now. */
  admit(approxBytes: number): void;
  /** Resolves once every row accepted before the call is in ClickHouse. */
  flush(): Promise<void>;
  /** Refuses new rows, makes accepted ones durable and inserts them; what is still uninserted after the timeout stays in the log for the next start. */
  close(): Promise<void>;
  stats(): SpanWriterStats;
}

export interface SpanWriterStats {
  heldBytes: number;
  walBytes: number;
  pendingSegments: number;
  inserts: number;
  insertedRows: number;
  failedInserts: number;
}

type SpanStore = Pick<ClickHouseStore, "client" | "database" | "embedded">;

export interface SpanWriterOptions {
  store: SpanStore;
  walDir: string;
  limits: BatchLimits;
  log: Logger;
  /** First wait after a failed insert, doubling up to `maxRetryDelayMs`; retries never stop. */
  retryDelayMs: number;
  maxRetryDelayMs: number;
  closeTimeoutMs: number;
  /** Test-only: see `Config.ingest.crashAt`. */
  crashAt?: CrashPoint | null;
}

export function spanWriterOptions(config: Config, store: ClickHouseStore, log: Logger): SpanWriterOptions {
  return {
    store,
    log,
    walDir: join(config.dataDir, "wal"),
    limits: {
      queueBytes: config.ingest.queueBytes,
      walBytes: 4 * config.ingest.queueBytes,
      flushRows: config.ingest.flushRows,
      flushIntervalMs: config.ingest.flushIntervalMs,
      segmentBytes: 64 << 20,
    },
    retryDelayMs: 100,
    maxRetryDelayMs: 10_000,
    closeTimeoutMs: 10_000,
    crashAt: config.ingest.crashAt,
  };
}

/** The row format of this version's segments; one of another version is replayed by its own structure. */
const spanFormat = { tag: createHash("sha256").update(spanStructure).digest("hex").slice(0, 8), structure: spanStructure };

/** Whole rows of a segment in `structure`, or null when this encoder cannot read that structure. */
const readSegmentRows = (data: Uint8Array, structure: string) => {
  const columns = parseStructure(structure);
  return columns && completeRows(data, columns);
};

const sqlString = (value: string) => `'${value.replaceAll("\\", "\\\\").replaceAll("'", "\\'")}'`;

/**
 * A segment inserted before a crash and again at replay, or retried after an insert whose outcome was unknown,
 * carries the same token: ClickHouse skips its blocks in `spans` and in the roll-ups its materialized views write.
 */
const insertSettings = (segment: SealedSegment) =>
  [
    "insert_deduplicate = 1",
    `insert_deduplication_token = ${sqlString(`vigil-wal-${segment.name}`)}`,
    "deduplicate_blocks_in_dependent_materialized_views = 1",
    "async_insert = 0",
    // Built by merges instead (sql/clickhouse/004_message_words_index.sql).
    "exclude_materialize_skip_indexes_on_insert = 'message_words_idx'",
  ].join(", ");

type InsertSegment = (segment: SealedSegment) => Promise<void>;

/**
 * Inserts the segment's rows but those whose span another segment already stored, and each span of the segment
 * once: the roll-ups' materialized views then see every span exactly once, however often an exporter sent it.
 * Rows are tagged with their segment and the lookup never skips the segment's own rows, so an insert retried or
 * replayed after a crash sends the same rows under the same token: ClickHouse deduplicates them in `spans` and
 * in each view's table on its own, writing only the parts the interrupted insert had not committed. A segment
 * of an earlier row format inserts the columns the table still has; the others take their defaults.
 */
function insertNewSpans(store: SpanStore, tableColumns: ReadonlySet<string>, segment: SealedSegment, source: string) {
  const columns =
    segment.structure === spanStructure
      ? spanColumnList
      : parseStructure(segment.structure)!
          .map(([name]) => name)
          .filter((name) => tableColumns.has(name))
          .join(", ");
  return `INSERT INTO ${store.database}.spans (${columns}, wal_segment) SETTINGS ${insertSettings(segment)}
  SELECT ${columns}, {walSegment:String} FROM ${source}
  WHERE (organization_id, project_id, trace_id, span_id) NOT IN (${spansStoredByOtherSegments(store.database)})
  LIMIT 1 BY organization_id, project_id, trace_id, span_id`;
}

const insertParams = (segment: SealedSegment) => ({ ...segment.keys.queryParams(), walSegment: segment.name });

/** `tableColumns`: the columns `spans` has, as `assertSpanColumns` found them. */
export function segmentInserter(store: SpanStore, tableColumns: ReadonlySet<string>): InsertSegment {
  if (store.embedded) {
    // chdb takes inline data only in text formats; file() reads the RowBinary segment from disk as it is.
    return async (segment) => {
      await store.client.command({
        query: insertNewSpans(store, tableColumns, segment, `file(${sqlString(segment.path)}, 'RowBinary', ${sqlString(segment.structure)})`),
        query_params: insertParams(segment),
      });
    };
  }
  return async (segment) => {
    const result = await store.client.exec({
      query: `${insertNewSpans(store, tableColumns, segment, `input(${sqlString(segment.structure)})`)} FORMAT RowBinary`,
      query_params: insertParams(segment),
      values: createReadStream(segment.path, { end: segment.bytes - 1 }),
    });
    result.stream.resume();
    await finished(result.stream);
  };
}

/**
 * Test-only fault injection, making a crash in one window of an insert deterministic. `spans-part`: the views are
 * detached (a restart attaches them again) so only the `spans` part commits. `log-removal`: the whole insert
 * commits. Then the process is killed as a crash would, before the segment leaves the write-ahead log.
 */
function crashingInsert(store: SpanStore, insert: InsertSegment, window: CrashPoint["window"]): InsertSegment {
  return async (segment) => {
    if (window === "spans-part") {
      const result = await store.client.query({
        query: "SELECT name FROM system.tables WHERE database = {database:String} AND engine = 'MaterializedView'",
        query_params: { database: store.database },
        format: "JSONEachRow",
      });
      for (const { name } of await result.json<{ name: string }>()) await store.client.command({ query: `DETACH TABLE ${store.database}.${name}` });
    }
    await insert(segment);
    process.kill(process.pid, "SIGKILL");
  };
}

const withoutLowCardinality = (type: string) => type.replace(/LowCardinality\(([^()]*)\)/g, "$1");

/** Refuses to start when `spans` and the encoder disagree, rather than writing rows into the wrong columns; returns the table's columns. */
export async function assertSpanColumns(store: SpanStore): Promise<Set<string>> {
  const result = await store.client.query({ query: `DESCRIBE TABLE ${store.database}.spans`, format: "JSONEachRow" });
  const table = new Map((await result.json<{ name: string; type: string; default_type: string }>()).map((column) => [column.name, column]));
  const problems: string[] = [];
  for (const [name, type] of spanColumns) {
    const column = table.get(name);
    if (!column) problems.push(`${name} is missing`);
    else if (withoutLowCardinality(column.type) !== type) problems.push(`${name} is ${column.type}, the encoder writes ${type}`);
  }
  const written = new Set<string>(spanColumns.map(([name]) => name));
  for (const column of table.values()) {
    if (!written.has(column.name) && !column.default_type) problems.push(`${column.name} has no default and is not written`);
  }
  if (problems.length > 0) throw new Error(`${store.database}.spans does not match the span row encoder: ${problems.join("; ")}`);
  return new Set(table.keys());
}

/** Waits `ms`; false when aborted first. */
function sleep(ms: number, signal: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve(false);
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve(true);
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      resolve(false);
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

class WalSpanWriter implements SpanWriter {
  private readonly counters = { inserts: 0, insertedRows: 0, failedInserts: 0 };
  private readonly stopInserting = new AbortController();
  /**
   * The one inserter: segments go in one at a time, so a segment's lookup of spans already stored sees every
   * segment before it. chdb's insert keeps every core busy anyway, and a server takes large inserts quickly.
   */
  private readonly inserter: Promise<void>;
  private segmentsInserted = 0;

  constructor(
    private readonly batcher: SpanBatcher,
    private readonly wal: Wal,
    private readonly insert: InsertSegment,
    private readonly options: SpanWriterOptions,
  ) {
    this.inserter = this.insertSegments();
  }

  accept(rows: readonly SpanRow[], approxBytes: number) {
    return this.batcher.accept(rows, approxBytes);
  }

  admit(approxBytes: number) {
    this.batcher.admit(approxBytes);
  }

  flush() {
    return this.batcher.drain();
  }

  async close() {
    await this.batcher.close();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timedOut = await Promise.race([
      this.inserter.then(() => false),
      new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), this.options.closeTimeoutMs))),
    ]);
    clearTimeout(timer);
    if (!timedOut) return;
    this.stopInserting.abort();
    await this.inserter;
    this.options.log.warn("span inserts left in the write-ahead log for the next start", { segments: this.batcher.pendingSegments, bytes: this.wal.bytes });
  }

  stats(): SpanWriterStats {
    return { heldBytes: this.batcher.heldBytes, walBytes: this.wal.bytes, pendingSegments: this.batcher.pendingSegments, ...this.counters };
  }

  private async insertSegments() {
    for (let segment = await this.batcher.next(); segment; segment = await this.batcher.next()) {
      if (!(await this.insertUntilDone(segment))) return;
      this.batcher.finished(segment);
      if (this.stopInserting.signal.aborted) return;
    }
  }

  /** Retries until the insert succeeds; false when stopped at close, leaving the segment for the next start. */
  private async insertUntilDone(segment: SealedSegment): Promise<boolean> {
    const { log, retryDelayMs, maxRetryDelayMs } = this.options;
    const { crashAt } = this.options;
    const insert = ++this.segmentsInserted === crashAt?.segment ? crashingInsert(this.options.store, this.insert, crashAt.window) : this.insert;
    for (let attempt = 0; ; attempt++) {
      const started = performance.now();
      try {
        await insert(segment);
        log.debug("spans inserted", { segment: segment.name, rows: segment.rows, ms: Math.round(performance.now() - started) });
        break;
      } catch (error) {
        this.counters.failedInserts++;
        const delay = Math.min(retryDelayMs * 2 ** attempt, maxRetryDelayMs);
        log.warn("span insert failed; retrying", { error: error as Error, segment: segment.name, rows: segment.rows, attempt, retryInMs: delay });
        if (!(await sleep(delay, this.stopInserting.signal))) return false;
      }
    }
    this.counters.inserts++;
    this.counters.insertedRows += segment.rows;
    try {
      await this.wal.remove(segment);
    } catch (error) {
      // Replayed at the next start and skipped by its deduplication token.
      log.error("removing an inserted write-ahead log segment failed", { error: error as Error, segment: segment.name });
    }
    return true;
  }
}

/** Checks the table, recovers the write-ahead log and starts inserting; leftover segments are inserted first while new rows are accepted. */
export async function startSpanWriter(options: SpanWriterOptions): Promise<SpanWriter> {
  const tableColumns = await assertSpanColumns(options.store);
  const { wal, recovered } = await Wal.open(options.walDir, spanFormat, readSegmentRows, options.log);
  if (recovered.length > 0) {
    const rows = recovered.reduce((sum, segment) => sum + segment.rows, 0);
    options.log.info("replaying the span write-ahead log", { segments: recovered.length, rows });
  }
  const batcher = new SpanBatcher(wal, options.limits, options.log, recovered);
  return new WalSpanWriter(batcher, wal, segmentInserter(options.store, tableColumns), options);
}
