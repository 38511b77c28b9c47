import { Value } from "@sinclair/typebox/value";
import type { ClickHouseStore } from "../../db/clickhouse";
import { badRequest, HttpError, notFound } from "../../lib/errors";
import { describeValueError } from "../../lib/validation";
import { compileTraceFilters, validateTraceFilters, type FilterSet } from "../traces/filters";
import { QueryParams } from "../traces/params";
import { bindScope, traceRelationSql } from "../traces/relation";
import { maxSessionIdLength, TraceRefByFilters, TraceRefById, type TraceRef } from "./model";

/**
 * Checks a TraceRef against the variant its `by` names, so a 400 says which field of which variant
 * is wrong rather than that the union did not match.
 */
export function checkTraceRefShape(ref: unknown, field = "trace"): void {
  const by = typeof ref === "object" && ref !== null ? (ref as { by?: unknown }).by : undefined;
  const schema = by === "id" ? TraceRefById : by === "filters" ? TraceRefByFilters : null;
  if (!schema) throw badRequest(`${field}.by: must be one of: id, filters`);
  const error = Value.Errors(schema, ref).First();
  if (error) throw badRequest(`${field}${error.path.replaceAll("/", ".")}: ${describeValueError(error as Parameters<typeof describeValueError>[0])}`);
}

/** What a score takes from the trace it is attached to. */
export interface ScoredTrace {
  traceId: string;
  /** The trace's session; null when it has none or when it is longer than a score's `sessionId` may be. */
  sessionId: string | null;
  /** The trace's last LLM-completion span: where a score pins when no span is given. */
  lastLlmSpanId: string | null;
  /** First span start and last span end (ClickHouse DateTime64(9) text): the range holding its spans. */
  startTime: string;
  endTime: string;
}

export async function findScoredTrace(ch: ClickHouseStore, organizationId: string, projectId: string, traceId: string): Promise<ScoredTrace | null> {
  const [row] = await ch.read<{ trace_id: string; session_id: string | null; last_llm_span_id: string; start_time: string; end_time: string }>(organizationId, `
      SELECT trace_id, any(session_id) AS session_id, argMaxMerge(last_llm_span_id) AS last_llm_span_id,
        toString(min(start_time)) AS start_time, toString(max(end_time)) AS end_time
      FROM ${ch.database}.traces
      WHERE organization_id = {organizationId:String} AND project_id = {projectId:String} AND trace_id = {traceId:String}
      GROUP BY trace_id`, { organizationId, projectId, traceId: traceId.toLowerCase() });
  if (!row) return null;
  // A longer session id cannot be stored on a score, and a truncated one would name another session.
  const sessionId = row.session_id && row.session_id.length <= maxSessionIdLength ? row.session_id : null;
  return { traceId: row.trace_id, sessionId, lastLlmSpanId: row.last_llm_span_id || null, startTime: row.start_time, endTime: row.end_time };
}

/** Conditions and parameters selecting one trace's spans through the `spans` sort key: tenant, time range, then id. */
export function traceSpansWhere(organizationId: string, projectId: string, trace: ScoredTrace) {
  return {
    where: `organization_id = {organizationId:String} AND project_id = {projectId:String}
      AND start_time BETWEEN {traceStart:DateTime64(9, 'UTC')} AND {traceEnd:DateTime64(9, 'UTC')} AND trace_id = {traceId:String}`,
    params: { organizationId, projectId, traceStart: trace.startTime, traceEnd: trace.endTime, traceId: trace.traceId },
  };
}

export async function traceHasSpan(ch: ClickHouseStore, organizationId: string, projectId: string, trace: ScoredTrace, spanId: string): Promise<boolean> {
  const spans = traceSpansWhere(organizationId, projectId, trace);
  return (await ch.read(organizationId, `SELECT 1 FROM ${ch.database}.spans WHERE ${spans.where} AND span_id = {spanId:String} LIMIT 1`, { ...spans.params, spanId })).length > 0;
}

/** Counting stops here: "more than 1000" says enough about a filter set that should match one trace. */
const matchCountCap = 1000;

/** Filter errors name their field from the request body's root: `trace.filters.…`. */
function validFilters(filters: FilterSet) {
  try {
    return validateTraceFilters(filters);
  } catch (error) {
    if (error instanceof HttpError) throw new HttpError(error.status, `trace.${error.message}`);
    throw error;
  }
}

/** Ids of the traces a filter set matches, one past the cap at most. */
async function matchTraces(ch: ClickHouseStore, organizationId: string, projectId: string, filters: FilterSet) {
  const params = new QueryParams();
  const scope = bindScope(params, ch.database, organizationId, projectId);
  const compiled = compileTraceFilters(validFilters(filters), {
    params,
    database: ch.database,
    organizationId: scope.organizationId,
    projectId: scope.projectId,
    spanScope: "1",
    percentile: (expression, columns, fraction, window) =>
      `(SELECT quantile(${fraction})(${expression}) FROM ${traceRelationSql(columns, scope)} WHERE ${window})`,
  });
  const relation = traceRelationSql([...compiled.columns], scope);
  return (await ch.read<{ trace_id: string }>(organizationId, `SELECT trace_id FROM ${relation} WHERE ${compiled.where} ORDER BY trace_id LIMIT ${matchCountCap + 1}`, params.values)).map((row) => row.trace_id);
}

/** The one trace a TraceRef names: 404 for an unknown id, 400 unless filters match exactly one trace. */
export async function resolveTraceRef(ch: ClickHouseStore, organizationId: string, projectId: string, ref: TraceRef): Promise<ScoredTrace> {
  const traceId = ref.by === "id" ? ref.id : await onlyMatch(ch, organizationId, projectId, ref.filters);
  const trace = await findScoredTrace(ch, organizationId, projectId, traceId);
  if (!trace) throw notFound("Trace");
  return trace;
}

async function onlyMatch(ch: ClickHouseStore, organizationId: string, projectId: string, filters: FilterSet): Promise<string> {
  const matches = await matchTraces(ch, organizationId, projectId, filters);
  if (matches.length === 1) return matches[0]!;
  const count = matches.length > matchCountCap ? `more than ${matchCountCap} traces` : `${matches.length} traces`;
  throw badRequest(`trace.filters: must match exactly one trace; they match ${count}`);
}
