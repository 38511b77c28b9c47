import type { Sql } from "../../db/postgres";
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
 * Keeps `evaluation_alignment` current: recounts the confusion matrix of each evaluation whose
 * project had a score written (either side of a pair) since its last count. The latest verdict of the
 * evaluation and the latest published human annotation (not a flagger's) on a trace form its pair.
 */
export async function refreshAlignment(sql: Sql, evaluationIds?: string[]): Promise<number> {
  const stale = await sql<{ id: string; project_id: string }[]>`
    SELECT e.id, e.project_id FROM evaluations e LEFT JOIN evaluation_alignment a ON a.evaluation_id = e.id
    WHERE e.deleted_at IS NULL
      ${evaluationIds ? sql`AND e.id IN ${sql(evaluationIds)}` : sql`AND (a.evaluation_id IS NULL OR EXISTS (
        SELECT 1 FROM scores s WHERE s.project_id = e.project_id AND s.updated_at > a.updated_at))`}`;
  for (const evaluation of stale) {
    await sql`
      WITH verdicts AS (
        SELECT DISTINCT ON (trace_id) trace_id, passed FROM scores
        WHERE project_id = ${evaluation.project_id} AND source = 'evaluation' AND source_id = ${evaluation.id}
          AND deleted_at IS NULL AND error IS NULL AND trace_id IS NOT NULL
        ORDER BY trace_id, created_at DESC, id DESC),
      humans AS (
        SELECT DISTINCT ON (trace_id) trace_id, passed FROM scores
        WHERE project_id = ${evaluation.project_id} AND source = 'annotation' AND source_id <> 'SYSTEM'
          AND drafted_at IS NULL AND deleted_at IS NULL AND error IS NULL AND trace_id IS NOT NULL
        ORDER BY trace_id, updated_at DESC, id DESC),
      counts AS (
        SELECT count(*) FILTER (WHERE NOT v.passed AND NOT h.passed)::int AS tp,
          count(*) FILTER (WHERE NOT v.passed AND h.passed)::int AS fp,
          count(*) FILTER (WHERE v.passed AND h.passed)::int AS tn,
          count(*) FILTER (WHERE v.passed AND NOT h.passed)::int AS fn
        FROM verdicts v JOIN humans h USING (trace_id))
      INSERT INTO evaluation_alignment (evaluation_id, true_positives, false_positives, true_negatives, false_negatives, updated_at)
      SELECT ${evaluation.id}, tp, fp, tn, fn, now() FROM counts
      ON CONFLICT (evaluation_id) DO UPDATE SET true_positives = excluded.true_positives, false_positives = excluded.false_positives,
        true_negatives = excluded.true_negatives, false_negatives = excluded.false_negatives, updated_at = excluded.updated_at`;
  }
  return stale.length;
}
