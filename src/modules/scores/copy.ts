import type { ClickHouseStore } from "../../db/clickhouse";
import type { Queryable, Sql } from "../../db/postgres";
import type { Logger } from "../../lib/log";

interface SourceRow {
  id: string;
  organization_id: string;
  project_id: string;
  trace_id: string | null;
  span_id: string | null;
  session_id: string | null;
  simulation_id: string | null;
  signal_id: string | null;
  source: string;
  source_id: string;
  annotator_id: string | null;
  value: number;
  passed: boolean;
  errored: boolean;
  duration: string;
  tokens: string;
  cost: string;
  drafted_at: Date | null;
  deleted_at: Date | null;
  created_at: Date;
  updated_at: Date;
  version: string;
}

const sourceColumns = (sql: Queryable) =>
  sql`id, organization_id, project_id, trace_id, span_id, session_id, simulation_id, signal_id, source, source_id,
    annotator_id, value, passed, errored, duration, tokens, cost, drafted_at, deleted_at, created_at, updated_at, version`;

/** `2024-05-01 10:00:00.123`: what a DateTime64(3, 'UTC') column parses without best-effort mode. */
export const clickHouseTime = (date: Date) => date.toISOString().replace("T", " ").replace("Z", "");

const toCopyRow = (row: SourceRow) => ({
  organization_id: row.organization_id,
  project_id: row.project_id,
  trace_id: row.trace_id ?? "",
  id: row.id,
  span_id: row.span_id ?? "",
  session_id: row.session_id ?? "",
  simulation_id: row.simulation_id ?? "",
  signal_id: row.signal_id ?? "",
  source: row.source,
  source_id: row.source_id,
  annotator_id: row.annotator_id ?? "",
  value: row.value,
  passed: row.passed,
  errored: row.errored,
  duration: Number(row.duration),
  tokens: Number(row.tokens),
  cost: Number(row.cost),
  drafted_at: row.drafted_at ? clickHouseTime(row.drafted_at) : null,
  created_at: clickHouseTime(row.created_at),
  updated_at: clickHouseTime(row.updated_at),
  version: Number(row.version),
  deleted: row.deleted_at ? 1 : 0,
});

const batchSize = 1000;

/**
 * Keeps ClickHouse `scores` a copy of PostgreSQL `scores`. Writers enqueue score ids in
 * score_copy_outbox inside their transaction; this drains it, writing each score's current row with
 * its version, so replays and concurrent drains in several processes converge on the same copy.
 */
export class ScoreCopier {
  private stopped = false;
  private running: Promise<void> | null = null;
  private wake: (() => void) | null = null;
  private kicked = false;
  private lastDrain: Promise<unknown> = Promise.resolve();

  constructor(
    private sql: Sql,
    private ch: ClickHouseStore,
    private log: Logger,
    private pollIntervalMs = 1000,
  ) {}

  start() {
    this.running ??= this.loop();
  }

  /** Drains soon: called after a write commits, so the copy usually lands within milliseconds. */
  kick() {
    this.kicked = true;
    this.wake?.();
  }

  async stop() {
    this.stopped = true;
    this.wake?.();
    await this.running;
  }

  /**
   * Copies every enqueued score; returns how many outbox entries this call processed. Drains of one
   * process run one after another, so when it resolves, whatever this process had enqueued is copied.
   */
  drain(): Promise<number> {
    const drained = this.lastDrain.then(
      () => this.drainNow(),
      () => this.drainNow(),
    );
    this.lastDrain = drained;
    return drained;
  }

  private async drainNow(): Promise<number> {
    let total = 0;
    for (;;) {
      const copied = await this.sql.begin(async (tx) => {
        const claimed = await tx<{ score_id: string }[]>`
          DELETE FROM score_copy_outbox
          WHERE id IN (SELECT id FROM score_copy_outbox ORDER BY id LIMIT ${batchSize} FOR UPDATE SKIP LOCKED)
          RETURNING score_id`;
        if (claimed.length === 0) return 0;
        const ids = [...new Set(claimed.map((entry) => entry.score_id))];
        const rows = await tx<SourceRow[]>`SELECT ${sourceColumns(tx)} FROM scores WHERE id IN ${tx(ids)}`;
        await this.insert(rows);
        return claimed.length;
      });
      total += copied;
      if (copied < batchSize) return total;
    }
  }

  /** Re-copies every score from PostgreSQL; safe to repeat and to run beside the worker. */
  async rebuild(): Promise<number> {
    let after = "";
    let total = 0;
    for (;;) {
      const rows = await this.sql<SourceRow[]>`
        SELECT ${sourceColumns(this.sql)} FROM scores WHERE id > ${after} ORDER BY id LIMIT ${batchSize}`;
      if (rows.length === 0) return total;
      await this.insert(rows);
      total += rows.length;
      after = rows.at(-1)!.id;
    }
  }

  private async insert(rows: SourceRow[]) {
    if (rows.length === 0) return;
    await this.ch.client.insert({ table: `${this.ch.database}.scores`, values: rows.map(toCopyRow), format: "JSONEachRow" });
  }

  private async loop() {
    while (!this.stopped) {
      this.kicked = false;
      let failed = false;
      try {
        await this.drain();
      } catch (error) {
        failed = true;
        this.log.warn("score copy to clickhouse failed; retrying", { error: error as Error });
      }
      if (this.stopped || (this.kicked && !failed)) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, this.pollIntervalMs);
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wake = null;
    }
  }
}
