import type { LanguageModel } from "ai";
import type { Context } from "../../context";
import type { Queryable } from "../../db/postgres";
import { inTransaction } from "../../jobs/boss";
import { newId } from "../../lib/ids";
import { RateLimiter } from "../../lib/rate-limit";
import { flaggerSlugs, type FlaggerSlug } from "../projects/model";
import { scoreStorage } from "../scores/storage";
import type { NewScore, ScoreStore } from "../scores/store";
import { resolveTraceRef } from "../scores/trace-ref";
import type { FilterSet } from "../traces/filters";
import { flaggerCriteria, runFlaggers, type Evidence, type FlaggerResult } from "./flaggers";
import { judge, signalsLanguageModel } from "./llm";
import type { EvaluationSettings } from "./model";
import { invalidPattern, ruleMatches, type SessionMetrics } from "./rules";
import { signalsRuntime } from "./runtime";
import { loadTracesFacts, transcript, type TraceFacts, type TraceMetrics } from "./trace-facts";

/** Share of no-match traces a flagger sends to the judge, in percent, unless the project sets its own (SIGNALS.md default). */
export const flaggerSamplingPercent = 10;
/** Judge calls per minute per organization and detector. */
export const judgeCallsPerMinute = 30;
/** How far back the first scan looks. */
const firstScanLookbackMs = 3_600_000;
/** Quiet traces one scan examines at most. */
export const defaultTraceBatch = 2_000;
/** The queue of a project's quiet traces whose detectors failed during a scan, run again later. */
export const detectorRetryQueue = "signal-detectors-retry";
/** First retry of a failed project batch after this long (then doubling, five times): a failure is usually a store briefly unavailable. */
const retryDelaySeconds = 60;

export interface DetectorRetryJob {
  organizationId: string;
  projectId: string;
  traceIds: string[];
}

interface EvaluationRow {
  id: string;
  signal_id: string;
  name: string;
  settings: EvaluationSettings;
  filters: FilterSet | null;
  hash: string;
  sampling: number;
}

/**
 * Deterministic per trace and detector, so every process samples the same traces. A fast non-cryptographic
 * hash (wyhash): it runs for every trace and flagger, and nothing here needs resistance to collisions.
 */
const sampled = (traceId: string, detector: string, percent: number) => Number(Bun.hash(`${traceId}:${detector}`) % 100n) < percent;

/**
 * Runs flaggers and custom-signal evaluations on traces once they are finished: quiet for
 * TRACE_QUIET_SECONDS (no span ingested since). Nothing runs on the ingest path. A scan takes the
 * fleet-wide watermark row with SKIP LOCKED, so one process scans at a time; each trace's verdict per
 * detector is recorded in trace_detector_runs, so a trace that becomes quiet again after late spans is
 * flagged at most once per flagger.
 */
export class TraceDetectors {
  private model: LanguageModel | null;
  private limiter: RateLimiter;
  private store: ScoreStore;

  constructor(
    private ctx: Context,
    private readonly traceBatch = defaultTraceBatch,
  ) {
    this.model = signalsLanguageModel(ctx.config);
    this.limiter = new RateLimiter(ctx.sql);
    this.store = scoreStorage(ctx).store;
  }

  /**
   * Scans batch after batch until the quiet cutoff is reached (the scheduled job: a minute at full load
   * brings far more quiet traces than one batch); resolves to how many traces were examined.
   */
  async scanUntilCaughtUp(now = new Date()): Promise<number> {
    let total = 0;
    for (;;) {
      const examined = await this.scan(now);
      total += examined;
      if (examined < this.traceBatch) return total;
    }
  }

  /** Scans traces that went quiet since the last scan; resolves to how many traces were examined. */
  async scan(now = new Date()): Promise<number> {
    const cutoff = new Date(now.getTime() - this.ctx.config.signals.traceQuietSeconds * 1000);
    return this.ctx.sql.begin(async (tx) => {
      await tx`INSERT INTO quiet_trace_scan (scanned_until) VALUES (${new Date(cutoff.getTime() - firstScanLookbackMs)}) ON CONFLICT DO NOTHING`;
      const [state] = await tx<{ scanned_until: Date; scanned_through_trace: string[] }[]>`
        SELECT scanned_until, scanned_through_trace FROM quiet_trace_scan FOR UPDATE SKIP LOCKED`;
      if (!state || state.scanned_until >= cutoff) return 0;
      const [throughOrganization, throughProject, throughTrace] = state.scanned_through_trace;
      // Rows ingested after `from` only: the minmax index on last_ingested_at skips the rest of the roll-up.
      const result = await this.ctx.ch.client.query({
        query: `
          SELECT organization_id, project_id, trace_id, max(last_ingested_at) AS last, toUnixTimestamp64Milli(last) AS last_ms
          FROM ${this.ctx.ch.database}.traces
          WHERE last_ingested_at >= {from:DateTime64(3, 'UTC')}
          GROUP BY organization_id, project_id, trace_id
          HAVING ${throughTrace === undefined ? "last > {from:DateTime64(3, 'UTC')}" : "(last, organization_id, project_id, trace_id) > ({from:DateTime64(3, 'UTC')}, {organizationId:String}, {projectId:String}, {traceId:String})"}
            AND last <= {to:DateTime64(3, 'UTC')}
          ORDER BY last, organization_id, project_id, trace_id
          LIMIT ${this.traceBatch}`,
        query_params: {
          from: state.scanned_until.getTime() / 1000,
          to: cutoff.getTime() / 1000,
          organizationId: throughOrganization ?? "",
          projectId: throughProject ?? "",
          traceId: throughTrace ?? "",
        },
        format: "JSONEachRow",
      });
      const traces = await result.json<{ organization_id: string; project_id: string; trace_id: string; last_ms: number }>();
      const byProject = Map.groupBy(traces, (trace) => `${trace.organization_id}\u0000${trace.project_id}`);
      for (const group of byProject.values()) {
        const job: DetectorRetryJob = { organizationId: group[0]!.organization_id, projectId: group[0]!.project_id, traceIds: group.map((trace) => trace.trace_id) };
        try {
          await this.runTraces(job.organizationId, job.projectId, job.traceIds);
        } catch (error) {
          this.ctx.log.warn("trace detectors failed; the project's traces are queued to run again", { projectId: job.projectId, traces: job.traceIds.length, error: error as Error });
          // In the scan's transaction: the watermark moves past these traces only with their retry queued.
          await this.ctx.boss.send(detectorRetryQueue, job, { db: inTransaction(tx), startAfter: retryDelaySeconds, retryLimit: 5, retryDelay: retryDelaySeconds, retryBackoff: true });
        }
      }
      // A full batch ends inside the traces stamped with its last instant: the next scan resumes after its last trace.
      const last = traces.length === this.traceBatch ? traces.at(-1)! : null;
      const until = last ? new Date(last.last_ms) : cutoff;
      const through = last ? [last.organization_id, last.project_id, last.trace_id] : [];
      await tx`UPDATE quiet_trace_scan SET scanned_until = ${until}, scanned_through_trace = ${through}`;
      return traces.length;
    });
  }

  runTrace(organizationId: string, projectId: string, traceId: string): Promise<void> {
    return this.runTraces(organizationId, projectId, [traceId]);
  }

  /** Every enabled flagger and active evaluation of the project, on each of these traces. */
  async runTraces(organizationId: string, projectId: string, traceIds: string[]): Promise<void> {
    const [project] = await this.ctx.sql<{ flaggers: Record<string, boolean>; flagger_sampling: Record<string, number> }[]>`
      SELECT flaggers, flagger_sampling FROM projects WHERE id = ${projectId} AND organization_id = ${organizationId} AND deleted_at IS NULL`;
    if (!project) return;
    const evaluations = (
      await this.ctx.sql<EvaluationRow[]>`
        SELECT id, signal_id, name, settings, filters, hash, sampling FROM evaluations
        WHERE project_id = ${projectId} AND archived_at IS NULL AND deleted_at IS NULL AND sampling > 0`
    ).filter((evaluation) => this.runnable(evaluation));
    const enabled = flaggerSlugs.filter((slug) => project.flaggers[slug] !== false);
    if (enabled.length === 0 && evaluations.length === 0) return;
    for (const facts of await loadTracesFacts(this.ctx.ch, organizationId, projectId, traceIds)) {
      const results = runFlaggers(facts, enabled);
      for (const slug of enabled) {
        const result = results.get(slug)!;
        const judged = this.judged(facts, slug, result, project.flagger_sampling[slug] ?? flaggerSamplingPercent);
        // Most results are a no-match nobody reviews: nothing to record, and no await per trace and flagger.
        if (result.outcome === "matched" || judged) await this.settleFlagger(facts, slug, result, judged);
      }
      for (const evaluation of evaluations) {
        // One evaluation failing on a trace (its embeddings endpoint down, say) leaves the others and the flaggers be.
        await this.runEvaluation(facts, evaluation).catch((error: Error) => this.ctx.log.warn("custom signal evaluation failed", { evaluationId: evaluation.id, traceId: facts.trace.traceId, error }));
      }
    }
  }

  /** Whether an evaluation can run: a rule stored with a pattern RE2 refuses (accepted before patterns were checked as RE2) is skipped. */
  private runnable(evaluation: EvaluationRow): boolean {
    const invalid = evaluation.settings.kind === "rule" ? invalidPattern(evaluation.settings) : null;
    if (invalid) this.ctx.log.warn("custom signal evaluation skipped: its pattern is not valid RE2", { evaluationId: evaluation.id, condition: invalid.index, reason: invalid.reason });
    return !invalid;
  }

  /**
   * Whether the judge reviews a flagger's result: an ambiguous one, or a sampled no-match. Without a
   * provider no judge runs, so no-match traces are not sampled at all. A suppressed result is never reviewed.
   */
  private judged(facts: TraceFacts, slug: FlaggerSlug, result: FlaggerResult, samplingPercent: number): boolean {
    if (result.reason === "suppressed") return false;
    return result.outcome === "ambiguous" || (result.outcome === "no-match" && this.model !== null && sampled(facts.trace.traceId, slug, samplingPercent));
  }

  private async settleFlagger(facts: TraceFacts, slug: FlaggerSlug, result: FlaggerResult, judged: boolean) {
    if (result.reason === "suppressed") return;
    let verdict = result;
    if (result.outcome !== "matched") {
      if (!judged) return;
      const decision = await this.judge(facts, `flagger:${slug}`, flaggerCriteria[slug]);
      if (decision === null) {
        // No provider (or over the rate limit): an ambiguous trace is recorded as not flagged.
        if (result.outcome === "ambiguous") await this.record(this.ctx.sql, facts, slug, "not-flagged", null);
        return;
      }
      if (!decision.failed) return void (await this.record(this.ctx.sql, facts, slug, "not-flagged", null));
      verdict = { outcome: "matched", evidence: result.evidence ?? { messageIndex: null, excerpt: decision.reason.slice(0, 160) }, reason: decision.reason || result.reason };
    }
    await this.writeFlag(facts, slug, verdict);
  }

  /**
   * Records a detector's verdict on a trace; true when this call made it `matched` (the trace was not
   * flagged by it before), which is what allows writing the flag, in the same transaction.
   */
  private async record(sql: Queryable, facts: TraceFacts, detector: string, outcome: "matched" | "not-flagged", scoreId: string | null): Promise<boolean> {
    const rows = await sql`
      INSERT INTO trace_detector_runs (project_id, trace_id, detector, outcome, score_id)
      VALUES (${facts.projectId}, ${facts.trace.traceId}, ${detector}, ${outcome}, ${scoreId})
      ON CONFLICT (project_id, trace_id, detector) DO UPDATE SET outcome = excluded.outcome, score_id = excluded.score_id, created_at = now()
        WHERE trace_detector_runs.outcome <> 'matched' AND excluded.outcome = 'matched'
      RETURNING outcome`;
    return outcome === "matched" && rows.length === 1;
  }

  /**
   * A published SYSTEM annotation naming the flagger and quoting the evidence, anchored at it; written in
   * the transaction that marks the trace flagged, so a crash leaves both or neither.
   */
  private async writeFlag(facts: TraceFacts, slug: FlaggerSlug, result: FlaggerResult): Promise<void> {
    const evidence: Evidence = result.evidence ?? { messageIndex: null, excerpt: "" };
    const where = evidence.messageIndex === null ? "" : ` in message ${evidence.messageIndex}`;
    const feedback = `[${slug}] ${capitalize(result.reason)}${where}: "${evidence.excerpt}"`;
    const id = newId();
    const flag = {
      id,
      organizationId: facts.organizationId,
      projectId: facts.projectId,
      source: "annotation",
      sourceId: "SYSTEM",
      traceId: facts.trace.traceId,
      spanId: facts.trace.lastLlmSpanId,
      sessionId: facts.trace.sessionId,
      simulationId: null,
      signalId: null,
      value: 0,
      passed: false,
      feedback,
      error: null,
      duration: 0,
      tokens: 0,
      cost: 0,
      metadata: { rawFeedback: feedback, flagger: slug, ...(evidence.messageIndex === null ? {} : { messageIndex: evidence.messageIndex }) },
      annotatorId: null,
      draftedAt: null,
    } satisfies NewScore;
    await this.store.insertClaimed(flag, (tx) => this.record(tx, facts, slug, "matched", id));
  }

  /** A custom signal's evaluation on a trace that passes its filters: one evaluation score per trace. */
  private async runEvaluation(facts: TraceFacts, evaluation: EvaluationRow) {
    if (evaluation.sampling < 100 && !sampled(facts.trace.traceId, evaluation.id, evaluation.sampling)) return;
    if (evaluation.filters && !(await this.passesFilters(facts, evaluation.filters))) return;
    let failed: boolean;
    let feedback: string;
    if (evaluation.settings.kind === "rule") {
      const session = evaluation.settings.conditions.some((condition) => condition.type === "metric" && condition.aggregation) ? await this.sessionMetrics(facts) : [];
      const { matched, held } = await ruleMatches(evaluation.settings, facts, session, signalsRuntime(this.ctx).embedder);
      failed = matched;
      feedback = matched ? `${evaluation.name}: ${held.join(", ")} matched` : `${evaluation.name}: no match`;
    } else {
      const decision = await this.judge(facts, `evaluation:${evaluation.id}`, evaluation.settings.criteria);
      if (decision === null) return;
      failed = decision.failed;
      feedback = decision.reason || (failed ? `${evaluation.name}: criteria met` : `${evaluation.name}: criteria not met`);
    }
    const id = newId();
    const verdict = {
      id,
      organizationId: facts.organizationId,
      projectId: facts.projectId,
      source: "evaluation",
      sourceId: evaluation.id,
      traceId: facts.trace.traceId,
      spanId: facts.trace.lastLlmSpanId,
      sessionId: facts.trace.sessionId,
      simulationId: null,
      signalId: failed ? evaluation.signal_id : null,
      value: failed ? 0 : 1,
      passed: !failed,
      feedback,
      error: null,
      duration: 0,
      tokens: 0,
      cost: 0,
      metadata: { evaluationHash: evaluation.hash },
      annotatorId: null,
      draftedAt: null,
    } satisfies NewScore;
    // One verdict per trace and evaluation, claimed in the transaction that writes it.
    await this.store.insertClaimed(verdict, async (tx) => {
      const claimed = await tx`
        INSERT INTO trace_detector_runs (project_id, trace_id, detector, outcome, score_id)
        VALUES (${facts.projectId}, ${facts.trace.traceId}, ${`evaluation:${evaluation.id}`}, ${failed ? "matched" : "not-flagged"}, ${id})
        ON CONFLICT DO NOTHING RETURNING detector`;
      return claimed.length === 1;
    });
  }

  private async passesFilters(facts: TraceFacts, filters: FilterSet): Promise<boolean> {
    try {
      await resolveTraceRef(this.ctx.ch, facts.organizationId, facts.projectId, {
        by: "filters",
        filters: { ...filters, traceId: [...(filters.traceId ?? []), { op: "eq", value: facts.trace.traceId }] },
      } as never);
      return true;
    } catch {
      return false;
    }
  }

  private async sessionMetrics(facts: TraceFacts): Promise<SessionMetrics> {
    if (!facts.trace.sessionId) return [facts.metrics];
    const result = await this.ctx.ch.client.query({
      query: `
        SELECT trace_id, sum(span_count) AS spans, sum(error_count) AS errors, sum(tokens_input) AS input, sum(tokens_output) AS output,
          sum(tokens_cache_read) AS cache_read, sum(tokens_cache_create) AS cache_create, sum(cost_total_microcents) AS cost,
          dateDiff('millisecond', min(start_time), max(end_time)) AS duration
        FROM ${this.ctx.ch.database}.traces
        WHERE organization_id = {organizationId:String} AND project_id = {projectId:String}
          -- A trace's roll-up rows are merged at read time; only some of them carry its session id.
          AND trace_id IN (SELECT trace_id FROM ${this.ctx.ch.database}.traces
            WHERE organization_id = {organizationId:String} AND project_id = {projectId:String} AND session_id = {sessionId:String})
        GROUP BY trace_id`,
      query_params: { organizationId: facts.organizationId, projectId: facts.projectId, sessionId: facts.trace.sessionId },
      format: "JSONEachRow",
    });
    const rows = await result.json<Record<string, string | number>>();
    return rows.map(
      (row): TraceMetrics => ({
        durationMs: Number(row.duration),
        cost: Number(row.cost),
        tokensInput: Number(row.input),
        tokensOutput: Number(row.output),
        tokensCacheRead: Number(row.cache_read),
        tokensCacheCreate: Number(row.cache_create),
        errorCount: Number(row.errors),
        spanCount: Number(row.spans),
      }),
    );
  }

  /** The LLM judge's verdict, or null without a provider or over the per-organization rate limit. */
  private async judge(facts: TraceFacts, detector: string, criteria: string) {
    if (!this.model) return null;
    const limit = await this.limiter.hit(`judge:${facts.organizationId}:${detector}`, judgeCallsPerMinute, 60);
    if (!limit.allowed) return null;
    try {
      return await judge(this.model, criteria, transcript(facts.conversation));
    } catch (error) {
      this.ctx.log.warn("signal judge failed", { detector, error: error as Error });
      return null;
    }
  }
}

const capitalize = (text: string) => text.charAt(0).toUpperCase() + text.slice(1);
