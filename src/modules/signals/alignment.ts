import type { Queryable, Sql } from "../../db/postgres";
import type { ScoreRecord } from "../scores/store";
import type { EvaluationAlignmentMetrics } from "./model";

/** Pairs of an evaluation verdict and a human annotation on the same trace; positive = failure. */
export interface ConfusionMatrix {
  tp: number;
  fp: number;
  tn: number;
  fn: number;
}

/** A ratio whose denominator is zero is 1 (SIGNALS.md). */
const ratio = (numerator: number, denominator: number) => (denominator === 0 ? 1 : numerator / denominator);

export function alignmentMetrics({ tp, fp, tn, fn }: ConfusionMatrix): EvaluationAlignmentMetrics {
  const precision = ratio(tp, tp + fp);
  const recall = ratio(tp, tp + fn);
  const specificity = ratio(tn, tn + fp);
  const negativePredictiveValue = ratio(tn, tn + fn);
  const balancedAccuracy = (recall + specificity) / 2;
  const mccDenominator = Math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn));
  return {
    alignmentMetric: balancedAccuracy,
    accuracy: ratio(tp + tn, tp + fp + tn + fn),
    precision,
    recall,
    specificity,
    trueness: (precision + negativePredictiveValue) / 2,
    f1: ratio(2 * precision * recall, precision + recall),
    balancedAccuracy,
    matthewsCorrelationCoefficient: mccDenominator === 0 ? 0 : (tp * tn - fp * fn) / mccDenominator,
  };
}

/**
 * Repair sweep (a scheduled job): recounts each evaluation whose project had a score written since
 * its last count. Writes on either side of a pair recount at once (`realignAfterScoreWrite`).
 */
export async function refreshAlignment(sql: Sql, evaluationIds?: string[]): Promise<number> {
  const stale = await sql<{ id: string; project_id: string }[]>`
    SELECT e.id, e.project_id FROM evaluations e LEFT JOIN evaluation_alignment a ON a.evaluation_id = e.id
    WHERE e.deleted_at IS NULL
      ${evaluationIds ? sql`AND e.id IN ${sql(evaluationIds)}` : sql`AND (a.evaluation_id IS NULL OR EXISTS (
        SELECT 1 FROM scores s WHERE s.project_id = e.project_id AND s.updated_at > a.updated_at))`}`;
  for (const evaluation of stale) await recountAlignment(sql, evaluation.id, evaluation.project_id);
  return stale.length;
}

/**
 * Recounts the evaluations a committed score write can change: an evaluation's verdict on a trace a
 * person annotated, or a person's annotation on a trace evaluations gave verdicts on. Other writes
 * (flaggers' annotations, custom scores, verdicts with no human pair) leave every matrix as it was.
 */
export async function realignAfterScoreWrite(sql: Sql, score: Pick<ScoreRecord, "projectId" | "source" | "sourceId" | "traceId">): Promise<void> {
  if (!score.traceId) return;
  let evaluationIds: string[] = [];
  if (score.source === "evaluation") {
    const [paired] = await sql<{ paired: boolean }[]>`
      SELECT EXISTS (SELECT 1 FROM evaluations WHERE id = ${score.sourceId} AND project_id = ${score.projectId})
        AND EXISTS (SELECT 1 FROM scores WHERE project_id = ${score.projectId} AND trace_id = ${score.traceId} AND ${humanAnnotation(sql)}) AS paired`;
    if (paired!.paired) evaluationIds = [score.sourceId];
  } else if (score.source === "annotation" && score.sourceId !== "SYSTEM") {
    const rows = await sql<{ id: string }[]>`
      SELECT DISTINCT e.id FROM scores s JOIN evaluations e ON e.id = s.source_id AND e.project_id = s.project_id
      WHERE s.project_id = ${score.projectId} AND s.trace_id = ${score.traceId} AND s.source = 'evaluation' AND s.deleted_at IS NULL`;
    evaluationIds = rows.map((row) => row.id);
  }
  if (evaluationIds.length) await refreshAlignment(sql, evaluationIds);
}

/** A published human annotation (not a flagger's): the reference side of a pair. */
const humanAnnotation = (sql: Queryable) =>
  sql`source = 'annotation' AND source_id <> 'SYSTEM' AND drafted_at IS NULL AND deleted_at IS NULL AND error IS NULL AND trace_id IS NOT NULL`;

/**
 * One evaluation's confusion matrix. The latest published human annotation on a trace and the
 * evaluation's latest verdict on it form its pair; the count starts from the project's human
 * annotations (few) and looks each verdict up by index, so it does not grow with the verdicts. Counts
 * of one evaluation are serialized (an advisory lock), so the last to finish saw every committed write.
 */
async function recountAlignment(sql: Sql, evaluationId: string, projectId: string) {
  await sql.begin(async (tx) => {
    await tx`SELECT pg_advisory_xact_lock(hashtextextended(${`evaluation-alignment:${evaluationId}`}, 0))`;
    await tx`
      WITH humans AS (
        SELECT DISTINCT ON (trace_id) trace_id, passed FROM scores
        WHERE project_id = ${projectId} AND ${humanAnnotation(tx)}
        ORDER BY trace_id, updated_at DESC, id DESC),
      pairs AS (
        SELECT v.passed AS verdict_passed, h.passed AS human_passed FROM humans h
        JOIN LATERAL (
          SELECT passed FROM scores
          WHERE project_id = ${projectId} AND source = 'evaluation' AND source_id = ${evaluationId} AND trace_id = h.trace_id
            AND deleted_at IS NULL AND error IS NULL
          ORDER BY created_at DESC, id DESC LIMIT 1) v ON true),
      counts AS (
        SELECT count(*) FILTER (WHERE NOT verdict_passed AND NOT human_passed)::int AS tp,
          count(*) FILTER (WHERE NOT verdict_passed AND human_passed)::int AS fp,
          count(*) FILTER (WHERE verdict_passed AND human_passed)::int AS tn,
          count(*) FILTER (WHERE verdict_passed AND NOT human_passed)::int AS fn
        FROM pairs)
      INSERT INTO evaluation_alignment (evaluation_id, true_positives, false_positives, true_negatives, false_negatives, updated_at)
      SELECT ${evaluationId}, tp, fp, tn, fn, now() FROM counts
      ON CONFLICT (evaluation_id) DO UPDATE SET true_positives = excluded.true_positives, false_positives = excluded.false_positives,
        true_negatives = excluded.true_negatives, false_negatives = excluded.false_negatives, updated_at = excluded.updated_at`;
  });
}
