import type { ClickHouseStore } from "../../db/clickhouse";
import type { GenAiMessage } from "../traces/model";
import { conversationOf } from "../traces/rows";
import { maxSessionIdLength } from "../scores/model";
import type { ScoredTrace } from "../scores/trace-ref";

/** A tool call in the conversation, with where it is. */
export interface ToolCall {
  id: string | null;
  name: string;
  arguments: unknown;
  messageIndex: number;
}

export interface ToolResult {
  id: string | null;
  name: string | null;
  response: unknown;
  messageIndex: number | null;
}

export interface TraceMetrics {
  durationMs: number;
  cost: number;
  tokensInput: number;
  tokensOutput: number;
  tokensCacheRead: number;
  tokensCacheCreate: number;
  errorCount: number;
  spanCount: number;
}

/** Everything the detectors (flaggers, rule conditions, judges) read of one finished trace, loaded once. */
export interface TraceFacts {
  organizationId: string;
  projectId: string;
  trace: ScoredTrace;
  conversation: GenAiMessage[];
  toolCalls: ToolCall[];
  toolResults: ToolResult[];
  finishReasons: string[];
  metrics: TraceMetrics;
}

/** What detectors read of a trace's spans, one row per trace as the facts query returns it. */
interface TraceSpansRow {
  trace_id: string;
  finish_reasons: string[];
  /** execute_tool spans in time order: [tool_call_id, tool_name, status_code, tool_output]. */
  tools: [string, string, string, string][];
  system_instructions: string;
  input_messages: string;
  output_messages: string;
  duration_ms: number;
  cost: number;
  tokens_input: number;
  tokens_output: number;
  tokens_cache_read: number;
  tokens_cache_create: number;
  error_count: number;
  span_count: number;
}

export type MessagePart = Record<string, unknown> & { type?: string };

export const partsOf = (message: GenAiMessage): MessagePart[] => (Array.isArray(message.parts) ? (message.parts as MessagePart[]) : []);

/** The text parts of a message, joined. */
export const messageText = (message: GenAiMessage) =>
  partsOf(message)
    .filter((part) => part.type === "text" && typeof part.content === "string")
    .map((part) => part.content as string)
    .join("\n");

const parseJson = (text: string): unknown => {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
};

/** Loads one trace's facts; null when the trace is not stored. */
export async function loadTraceFacts(ch: ClickHouseStore, organizationId: string, projectId: string, traceId: string): Promise<TraceFacts | null> {
  return (await loadTracesFacts(ch, organizationId, projectId, [traceId]))[0] ?? null;
}

/**
 * Facts of several traces of a project in two reads (their roll-ups, then their spans bounded by the
 * traces' time range, with message columns only for each trace's last LLM span), so detectors cost
 * little per trace: callers pass every trace of a tick at once, since a read of the range costs about
 * the same for a few traces as for all of them. Traces not stored are left out.
 */
export async function loadTracesFacts(ch: ClickHouseStore, organizationId: string, projectId: string, traceIds: string[]): Promise<TraceFacts[]> {
  if (traceIds.length === 0) return [];
  const rollups = await backgroundRead<{ trace_id: string; session_id: string | null; last_llm_span_id: string; start_time: string; end_time: string }>(
    ch,
    `
      SELECT trace_id, any(session_id) AS session_id, argMaxMerge(last_llm_span_id) AS last_llm_span_id,
        toString(min(start_time)) AS start_time, toString(max(end_time)) AS end_time
      FROM ${ch.database}.traces
      WHERE organization_id = {organizationId:String} AND project_id = {projectId:String} AND trace_id IN {traceIds:Array(String)}
      GROUP BY trace_id`,
    { organizationId, projectId, traceIds },
  );
  const traces = rollups.map(
    (row): ScoredTrace => ({
      traceId: row.trace_id,
      sessionId: row.session_id && row.session_id.length <= maxSessionIdLength ? row.session_id : null,
      lastLlmSpanId: row.last_llm_span_id || null,
      startTime: row.start_time,
      endTime: row.end_time,
    }),
  );
  if (traces.length === 0) return [];
  // One row per trace, aggregated where the spans are: the messages of its last LLM span only (`IN` is a
  // set lookup per span), its tool spans, and the sums of its metrics.
  const rows = await backgroundRead<TraceSpansRow>(
    ch,
    `
      SELECT trace_id,
        arrayFlatten(arrayMap(span -> span.2, arraySort(groupArray((start_time, finish_reasons))))) AS finish_reasons,
        arrayMap(tool -> [tool.2, tool.3, tool.4, tool.5],
          arraySort(groupArrayIf((start_time, tool_call_id, toString(tool_name), toString(status_code), tool_output), operation = 'execute_tool'))) AS tools,
        anyIf(system_instructions, span_id IN {lastLlm:Array(String)}) AS system_instructions,
        anyIf(input_messages, span_id IN {lastLlm:Array(String)}) AS input_messages,
        anyIf(output_messages, span_id IN {lastLlm:Array(String)}) AS output_messages,
        max(toUnixTimestamp64Milli(end_time)) - min(toUnixTimestamp64Milli(start_time)) AS duration_ms,
        sumIf(cost_total_microcents, NOT is_usage_wrapper) AS cost,
        sumIf(tokens_input, NOT is_usage_wrapper) AS tokens_input,
        sumIf(tokens_output, NOT is_usage_wrapper) AS tokens_output,
        sumIf(tokens_cache_read, NOT is_usage_wrapper) AS tokens_cache_read,
        sumIf(tokens_cache_create, NOT is_usage_wrapper) AS tokens_cache_create,
        countIf(status_code = 'error') AS error_count,
        count() AS span_count
      FROM ${ch.database}.spans FINAL
      WHERE organization_id = {organizationId:String} AND project_id = {projectId:String}
        AND start_time BETWEEN {from:DateTime64(9, 'UTC')} AND {to:DateTime64(9, 'UTC')} AND trace_id IN {traceIds:Array(String)}
      GROUP BY trace_id`,
    {
      organizationId,
      projectId,
      traceIds: traces.map((trace) => trace.traceId),
      lastLlm: traces.flatMap((trace) => (trace.lastLlmSpanId ? [trace.lastLlmSpanId] : [])),
      from: traces.map((trace) => trace.startTime).sort()[0],
      to: traces.map((trace) => trace.endTime).sort().at(-1),
    },
  );
  const byTrace = new Map(rows.map((row) => [row.trace_id, row]));
  return traces.map((trace) => factsOf(organizationId, projectId, trace, byTrace.get(trace.traceId) ?? null));
}

/**
 * A read of the detectors' background job. Not `ch.read`: its per-organization gate is for request
 * reads, and a scan holding it would make that organization's API reads queue and be refused.
 */
async function backgroundRead<T>(ch: ClickHouseStore, query: string, params: Record<string, unknown>): Promise<T[]> {
  const result = await ch.client.query({ query, query_params: params, format: "JSONEachRow" });
  return result.json<T>();
}

/** Builds a trace's facts from its spans' row; the last LLM span's messages are its conversation. */
function factsOf(organizationId: string, projectId: string, trace: ScoredTrace, row: TraceSpansRow | null): TraceFacts {
  const conversation = row && trace.lastLlmSpanId ? conversationOf(row) : [];
  const toolCalls: ToolCall[] = [];
  const toolResults: ToolResult[] = [];
  conversation.forEach((message, messageIndex) => {
    for (const part of partsOf(message)) {
      if (part.type === "tool_call") toolCalls.push({ id: (part.id as string) ?? null, name: String(part.name ?? ""), arguments: part.arguments, messageIndex });
      if (part.type === "tool_call_response") toolResults.push({ id: (part.id as string) ?? null, name: null, response: part.response, messageIndex });
    }
  });
  // Tool executions recorded as spans count as results too (status error is a failed one).
  for (const [toolCallId, toolName, statusCode, toolOutput] of row?.tools ?? []) {
    const response = statusCode === "error" ? { error: toolOutput || "tool span failed" } : parseJson(toolOutput);
    if (!toolResults.some((known) => known.id && known.id === toolCallId)) {
      toolResults.push({ id: toolCallId || null, name: toolName || null, response, messageIndex: null });
    }
  }
  return {
    organizationId,
    projectId,
    trace,
    conversation,
    toolCalls,
    toolResults,
    finishReasons: row?.finish_reasons ?? [],
    metrics: {
      durationMs: Number(row?.duration_ms ?? 0),
      cost: Number(row?.cost ?? 0),
      tokensInput: Number(row?.tokens_input ?? 0),
      tokensOutput: Number(row?.tokens_output ?? 0),
      tokensCacheRead: Number(row?.tokens_cache_read ?? 0),
      tokensCacheCreate: Number(row?.tokens_cache_create ?? 0),
      errorCount: Number(row?.error_count ?? 0),
      spanCount: Number(row?.span_count ?? 0),
    },
  };
}

/** The conversation as plain text for a judge: one line per message, tool calls and results included. */
export function transcript(conversation: GenAiMessage[]): string {
  return conversation
    .map((message, index) => {
      const parts = partsOf(message).map((part) => {
        if (part.type === "text") return String(part.content ?? "");
        if (part.type === "tool_call") return `[tool call ${String(part.name)} ${JSON.stringify(part.arguments ?? null)}]`;
        if (part.type === "tool_call_response") return `[tool result ${JSON.stringify(part.response ?? null).slice(0, 2000)}]`;
        return "";
      });
      return `#${index} ${String(message.role)}: ${parts.filter(Boolean).join(" ")}`;
    })
    .join("\n");
}

/** A tool result that reports a failure: isError, ok/success false, status error/failed, a non-empty error(s). */
export function isFailedToolResult(response: unknown): boolean {
  if (!response || typeof response !== "object" || Array.isArray(response)) return false;
  const value = response as Record<string, unknown>;
  if (value.isError === true || value.is_error === true || value.ok === false || value.success === false) return true;
  if (typeof value.status === "string" && /^(error|failed|failure)$/i.test(value.status)) return true;
  const error = value.error ?? value.errors;
  if (typeof error === "string") return error.trim() !== "";
  if (Array.isArray(error)) return error.length > 0;
  return error !== undefined && error !== null && error !== false && typeof error === "object" && Object.keys(error).length > 0;
}
