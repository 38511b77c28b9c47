import type { Queryable, Sql } from "../../db/postgres";

export type ScoreSource = "custom" | "evaluation" | "annotation";

/** One row of PostgreSQL `scores`: a custom or evaluation score, or an annotation. */
export interface ScoreRecord {
  id: string;
  organizationId: string;
  projectId: string;
  source: ScoreSource;
  sourceId: string;
  traceId: string | null;
  spanId: string | null;
  sessionId: string | null;
  simulationId: string | null;
  signalId: string | null;
  value: number;
  passed: boolean;
  feedback: string;
  error: string | null;
  errored: boolean;
  duration: number;
  tokens: number;
  cost: number;
  metadata: Record<string, unknown>;
  annotatorId: string | null;
  draftedAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
}

export type NewScore = Omit<ScoreRecord, "errored" | "createdAt" | "updatedAt">;

export interface ScoreChange {
  value?: number;
  passed?: boolean;
  feedback?: string;
  metadata?: Record<string, unknown>;
}

interface ScoreRow {
  id: string;
  organization_id: string;
  project_id: string;
  source: ScoreSource;
  source_id: string;
  trace_id: string | null;
  span_id: string | null;
  session_id: string | null;
  simulation_id: string | null;
  signal_id: string | null;
  value: number;
  passed: boolean;
  feedback: string;
  error: string | null;
  errored: boolean;
  duration: string;
  tokens: string;
  cost: string;
  metadata: Record<string, unknown>;
  annotator_id: string | null;
  drafted_at: Date | null;
  deleted_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

/** SIGNALS.md's discovery eligibility; "not yet linked" is for discovery itself to judge. */
const eligibleForDiscovery = (row: ScoreRow) =>
  row.deleted_at === null && row.drafted_at === null && !row.passed && row.error === null && row.feedback.trim() !== "";

const toRecord = (row: ScoreRow): ScoreRecord => ({
  id: row.id,
  organizationId: row.organization_id,
  projectId: row.project_id,
  source: row.source,
  sourceId: row.source_id,
  traceId: row.trace_id,
  spanId: row.span_id,
  sessionId: row.session_id,
  simulationId: row.simulation_id,
  signalId: row.signal_id,
  value: row.value,
  passed: row.passed,
  feedback: row.feedback,
  error: row.error,
  errored: row.errored,
  duration: Number(row.duration),
  tokens: Number(row.tokens),
  cost: Number(row.cost),
  metadata: row.metadata,
  annotatorId: row.annotator_id,
  draftedAt: row.drafted_at,
  createdAt: row.created_at,
  updatedAt: row.updated_at,
});

async function insertRow(tx: Queryable, score: NewScore): Promise<ScoreRow> {
  const [inserted] = await tx<ScoreRow[]>`
    INSERT INTO scores (id, organization_id, project_id, source, source_id, trace_id, span_id, session_id, simulation_id,
      signal_id, value, passed, feedback, error, duration, tokens, cost, metadata, annotator_id, drafted_at)
    VALUES (${score.id}, ${score.organizationId}, ${score.projectId}, ${score.source}, ${score.sourceId}, ${score.traceId},
      ${score.spanId}, ${score.sessionId}, ${score.simulationId}, ${score.signalId}, ${score.value}, ${score.passed},
      ${score.feedback}, ${score.error}, ${score.duration}, ${score.tokens}, ${score.cost}, ${tx.json(score.metadata as never)},
      ${score.annotatorId}, ${score.draftedAt})
    RETURNING *`;
  return inserted!;
}

export interface TracePageKey {
  createdAtMicros: string;
  id: string;
}

/**
 * PostgreSQL `scores`, the source of truth for scores and annotations. Every write also enqueues the
 * ClickHouse copy (score_copy_outbox) and keeps the score's event for signal discovery
 * (failed_score_events) in step with its eligibility, in the same transaction:
 * - eligible and without a live event: a pending event is recorded (again, if an earlier one was
 *   consumed and then retracted);
 * - no longer eligible: a pending event is deleted, since discovery never saw it; a consumed one is
 *   marked `retracted_at`, so discovery can take the score out of its signal.
 * Writers lock the score row before its events. A consumer that also updates scores claims with
 * `FOR UPDATE OF <events>, <scores> SKIP LOCKED`, so it never waits on a writer and the two cannot deadlock.
 */
export class ScoreStore {
  constructor(
    private sql: Sql,
    /** Told of each committed write; awaited before the write resolves, so what it updates is visible then. */
    private onCommitted: (score: ScoreRecord) => Promise<void>,
  ) {}

  async insert(score: NewScore): Promise<ScoreRecord> {
    return toRecord((await this.write((tx) => insertRow(tx, score)))!);
  }

  /**
   * Inserts the score only when `claim`, run first in the same transaction, returns true: what claims
   * the right to write it (a detector's verdict on a trace) commits with it or not at all.
   */
  async insertClaimed(score: NewScore, claim: (tx: Queryable) => Promise<boolean>): Promise<ScoreRecord | null> {
    const row = await this.write(async (tx) => ((await claim(tx)) ? insertRow(tx, score) : undefined));
    return row ? toRecord(row) : null;
  }

  async get(projectId: string, id: string, source: ScoreSource): Promise<ScoreRecord | null> {
    const [row] = await this.sql<ScoreRow[]>`
      SELECT * FROM scores WHERE id = ${id} AND project_id = ${projectId} AND source = ${source} AND deleted_at IS NULL`;
    return row ? toRecord(row) : null;
  }

  async update(projectId: string, id: string, source: ScoreSource, change: ScoreChange): Promise<ScoreRecord | null> {
    const row = await this.write(
      (tx) => tx<ScoreRow[]>`
        UPDATE scores SET
          value = coalesce(${change.value ?? null}::double precision, value),
          passed = coalesce(${change.passed ?? null}::boolean, passed),
          feedback = coalesce(${change.feedback ?? null}::text, feedback),
          metadata = metadata || ${tx.json((change.metadata ?? {}) as never)},
          version = version + 1,
          updated_at = now()
        WHERE id = ${id} AND project_id = ${projectId} AND source = ${source} AND deleted_at IS NULL
        RETURNING *`.then(([updated]) => updated),
    );
    return row ? toRecord(row) : null;
  }

  /** Confirms a draft; a score that is already published is returned unchanged. */
  async publish(projectId: string, id: string, source: ScoreSource): Promise<ScoreRecord | null> {
    const row = await this.write(
      (tx) => tx<ScoreRow[]>`
        UPDATE scores SET drafted_at = NULL,
          version = version + (drafted_at IS NOT NULL)::int,
          updated_at = CASE WHEN drafted_at IS NULL THEN updated_at ELSE now() END
        WHERE id = ${id} AND project_id = ${projectId} AND source = ${source} AND deleted_at IS NULL
        RETURNING *`.then(([published]) => published),
    );
    return row ? toRecord(row) : null;
  }

  async delete(projectId: string, id: string, source: ScoreSource): Promise<boolean> {
    const row = await this.write(
      (tx) => tx<ScoreRow[]>`
        UPDATE scores SET deleted_at = now(), version = version + 1, updated_at = now()
        WHERE id = ${id} AND project_id = ${projectId} AND source = ${source} AND deleted_at IS NULL
        RETURNING *`.then(([deleted]) => deleted),
    );
    return row !== undefined;
  }

  /** One page of a trace's scores of a source, newest first, drafts included. */
  async pageByTrace(projectId: string, traceId: string, source: ScoreSource, limit: number, after: TracePageKey | null) {
    const rows = await this.sql<(ScoreRow & { created_at_micros: string })[]>`
      SELECT *, (extract(epoch FROM created_at) * 1000000)::bigint::text AS created_at_micros
      FROM scores
      WHERE project_id = ${projectId} AND trace_id = ${traceId} AND source = ${source} AND deleted_at IS NULL
        ${after ? this.sql`AND (created_at, id) < (to_timestamp(0) + ${after.createdAtMicros}::bigint * interval '1 microsecond', ${after.id})` : this.sql``}
      ORDER BY created_at DESC, id DESC
      LIMIT ${limit}`;
    return rows.map((row) => ({ record: toRecord(row), key: { createdAtMicros: row.created_at_micros, id: row.id } }));
  }

  private async write<Row extends ScoreRow | undefined>(change: (tx: Queryable) => Promise<Row>): Promise<Row> {
    const row = await this.sql.begin(async (tx) => {
      const changed = await change(tx);
      if (!changed) return changed;
      await tx`INSERT INTO score_copy_outbox (score_id) VALUES (${changed.id})`;
      if (eligibleForDiscovery(changed)) {
        await tx`
          INSERT INTO failed_score_events (score_id, organization_id, project_id)
          VALUES (${changed.id}, ${changed.organization_id}, ${changed.project_id})
          ON CONFLICT (score_id) WHERE retracted_at IS NULL DO NOTHING`;
      } else {
        await tx`DELETE FROM failed_score_events WHERE score_id = ${changed.id} AND consumed_at IS NULL`;
        await tx`UPDATE failed_score_events SET retracted_at = now() WHERE score_id = ${changed.id} AND retracted_at IS NULL`;
      }
      return changed;
    });
    if (row) await this.onCommitted(toRecord(row));
    return row as Row;
  }
}
