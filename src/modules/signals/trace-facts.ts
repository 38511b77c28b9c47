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

/** The span columns detectors read, as the facts query returns them. */
export interface SpanRow {
  operation: string;
  status_code: string;
  tool_name: string;
  tool_call_id: string;
  tool_output: string;
  finish_reasons: string[];
  is_usage_wrapper: boolean;
  start_ms: number;
  end_ms: number;
  cost_total_microcents: string;
  tokens_input: string;
  tokens_output: string;
  tokens_cache_read: string;
  tokens_cache_create: string;
  span_id: string;
  system_instructions: string;
  input_messages: string;
  output_messages: string;
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
 * Facts of several traces of a project in two queries (their roll-ups, then their spans, with message
 * columns only for each trace's last LLM span), so detectors cost little per trace. Traces not stored
 * are left out.
 */
export async function loadTracesFacts(ch: ClickHouseStore, organizationId: string, projectId: string, traceIds: string[]): Promise<TraceFacts[]> {
  if (traceIds.length === 0) return [];
  const rollups = await ch.client.query({
    query: `
      SELECT trace_id, any(session_id) AS session_id, argMaxMerge(last_llm_span_id) AS last_llm_span_id,
        toString(min(start_time)) AS start_time, toString(max(end_time)) AS end_time
      FROM ${ch.database}.traces
      WHERE organization_id = {organizationId:String} AND project_id = {projectId:String} AND trace_id IN {traceIds:Array(String)}
      GROUP BY trace_id`,
    query_params: { organizationId, projectId, traceIds },
    format: "JSONEachRow",
  });
  const traces = (await rollups.json<{ trace_id: string; session_id: string | null; last_llm_span_id: string; start_time: string; end_time: string }>()).map(
    (row): ScoredTrace => ({
      traceId: row.trace_id,
      sessionId: row.session_id && row.session_id.length <= maxSessionIdLength ? row.session_id : null,
      lastLlmSpanId: row.last_llm_span_id || null,
      startTime: row.start_time,
      endTime: row.end_time,
    }),
  );
  if (traces.length === 0) return [];
  const result = await ch.client.query({
    query: `
      SELECT trace_id, span_id, operation, status_code, tool_name, tool_call_id, tool_output, finish_reasons, is_usage_wrapper,
        toUnixTimestamp64Milli(start_time) AS start_ms, toUnixTimestamp64Milli(end_time) AS end_ms,
        cost_total_microcents, tokens_input, tokens_output, tokens_cache_read, tokens_cache_create,
        if(has({lastLlm:Array(String)}, span_id), system_instructions, '') AS system_instructions,
        if(has({lastLlm:Array(String)}, span_id), input_messages, '') AS input_messages,
        if(has({lastLlm:Array(String)}, span_id), output_messages, '') AS output_messages
      FROM ${ch.database}.spans FINAL
      WHERE organization_id = {organizationId:String} AND project_id = {projectId:String}
        AND start_time BETWEEN {from:DateTime64(9, 'UTC')} AND {to:DateTime64(9, 'UTC')} AND trace_id IN {traceIds:Array(String)}
      ORDER BY start_time`,
    query_params: {
      organizationId,
      projectId,
      traceIds: traces.map((trace) => trace.traceId),
      lastLlm: traces.flatMap((trace) => (trace.lastLlmSpanId ? [trace.lastLlmSpanId] : [])),
      from: traces.map((trace) => trace.startTime).sort()[0],
      to: traces.map((trace) => trace.endTime).sort().at(-1),
    },
    format: "JSONEachRow",
  });
  const spans = Map.groupBy(await result.json<SpanRow & { trace_id: string }>(), (span) => span.trace_id);
  return traces.map((trace) => factsFromSpans(organizationId, projectId, trace, spans.get(trace.traceId) ?? []));
}

/** Builds a trace's facts from its spans (time order); the last LLM span carries the messages. */
export function factsFromSpans(organizationId: string, projectId: string, trace: ScoredTrace, spans: SpanRow[]): TraceFacts {
  const last = spans.find((span) => span.span_id === trace.lastLlmSpanId) ?? null;
  const conversation = conversationOf(last);
  const toolCalls: ToolCall[] = [];
  const toolResults: ToolResult[] = [];
  conversation.forEach((message, messageIndex) => {
    for (const part of partsOf(message)) {
      if (part.type === "tool_call") toolCalls.push({ id: (part.id as string) ?? null, name: String(part.name ?? ""), arguments: part.arguments, messageIndex });
      if (part.type === "tool_call_response") toolResults.push({ id: (part.id as string) ?? null, name: null, response: part.response, messageIndex });
    }
  });
  // Tool executions recorded as spans count as results too (status error is a failed one).
  for (const span of spans) {
    if (span.operation !== "execute_tool") continue;
    const response = span.status_code === "error" ? { error: span.tool_output || "tool span failed" } : parseJson(span.tool_output);
    if (!toolResults.some((known) => known.id && known.id === span.tool_call_id)) {
      toolResults.push({ id: span.tool_call_id || null, name: span.tool_name || null, response, messageIndex: null });
    }
  }
  const counted = spans.filter((span) => !span.is_usage_wrapper);
  const sum = (pick: (span: SpanRow) => string) => counted.reduce((total, span) => total + Number(pick(span)), 0);
  return {
    organizationId,
    projectId,
    trace,
    conversation,
    toolCalls,
    toolResults,
    finishReasons: spans.flatMap((span) => span.finish_reasons),
    metrics: {
      durationMs: spans.length ? Math.max(...spans.map((span) => Number(span.end_ms))) - Math.min(...spans.map((span) => Number(span.start_ms))) : 0,
      cost: sum((span) => span.cost_total_microcents),
      tokensInput: sum((span) => span.tokens_input),
      tokensOutput: sum((span) => span.tokens_output),
      tokensCacheRead: sum((span) => span.tokens_cache_read),
      tokensCacheCreate: sum((span) => span.tokens_cache_create),
      errorCount: spans.filter((span) => span.status_code === "error").length,
      spanCount: spans.length,
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
