import type { ResultSet } from "@clickhouse/client";
import type { ClickHouseStore } from "../../db/clickhouse";
import type { GenAiMessage } from "../traces/model";
import { lacksMessages, mergeLogContents, withLogContents, type LogContents, type MessageColumns } from "../traces/contents";
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

/** A trace's roll-up as the facts read returns it: its identity and its metrics, summed at ingest. */
interface TraceRollupRow {
  trace_id: string;
  session_id: string | null;
  last_llm_span_id: string;
  start_time: string;
  end_time: string;
  duration_ms: number;
  cost: number;
  tokens_input: number;
  tokens_output: number;
  tokens_cache_read: number;
  tokens_cache_create: number;
  error_count: number;
  span_count: number;
}

/** A span the detectors read beyond the roll-up: one with finish reasons, or a tool span. */
interface FactSpanRow {
  trace_id: string;
  span_id: string;
  finish_reasons: string[];
  /** [tool_call_id, tool_name, status_code, tool_output] of an execute_tool span, else empty. */
  tool: [string, string, string, string] | [];
}

/** What factsOf reads of a trace's spans. */
interface TraceSpans {
  finishReasons: string[];
  tools: [string, string, string, string][];
  /** The message columns of the trace's last LLM span, with those sent for it as log records. */
  lastLlm: MessageColumns | null;
  /** Whether the last LLM span has finish reasons of its own (else those of its log records count). */
  lastLlmFinished: boolean;
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
 * Facts of several traces of a project in three reads (four with log records), so detectors cost little
 * per trace: callers pass every trace of a tick at once, since a read of the range costs about the same
 * for a few traces as for all of them. First their roll-ups (identity, time range and metrics, summed at
 * ingest); then, within the traces' time range, only the spans the detectors look at, and the message
 * columns of each trace's last LLM span alone; the fourth, of `span_contents`, only for last LLM spans
 * lacking a side of their messages, which the OpenTelemetry instrumentations send as log records (the
 * conversation is the one the trace detail shows, so a flag's message index points into it). Ingest
 * stores a span once (a retried export is folded before the insert); should a duplicate still sit in a
 * part not merged yet, `LIMIT 1 BY` keeps one copy of each span, which is all FINAL would do here for
 * much less work. Traces not stored are left out.
 */
export async function loadTracesFacts(ch: ClickHouseStore, organizationId: string, projectId: string, traceIds: string[]): Promise<TraceFacts[]> {
  if (traceIds.length === 0) return [];
  const rollups = await backgroundRead<TraceRollupRow>(
    ch,
    `
      SELECT trace_id, any(session_id) AS session_id, argMaxMerge(last_llm_span_id) AS last_llm_span_id,
        toString(min(start_time)) AS start_time, toString(max(end_time)) AS end_time,
        toUnixTimestamp64Milli(max(rollup.end_time)) - toUnixTimestamp64Milli(min(rollup.start_time)) AS duration_ms,
        sum(cost_total_microcents) AS cost, sum(tokens_input) AS tokens_input, sum(tokens_output) AS tokens_output,
        sum(tokens_cache_read) AS tokens_cache_read, sum(tokens_cache_create) AS tokens_cache_create,
        sum(error_count) AS error_count, sum(span_count) AS span_count
      FROM ${ch.database}.traces AS rollup
      WHERE organization_id = {organizationId:String} AND project_id = {projectId:String} AND trace_id IN {traceIds:Array(String)}
      GROUP BY trace_id`,
    { organizationId, projectId, traceIds },
  );
  if (rollups.length === 0) return [];
  const range = {
    organizationId,
    projectId,
    traceIds: rollups.map((row) => row.trace_id),
    from: rollups.map((row) => row.start_time).sort()[0],
    to: rollups.map((row) => row.end_time).sort().at(-1),
  };
  const spansWhere = `organization_id = {organizationId:String} AND project_id = {projectId:String}
    AND start_time BETWEEN {from:DateTime64(9, 'UTC')} AND {to:DateTime64(9, 'UTC')} AND trace_id IN {traceIds:Array(String)}`;
  // The message columns are read apart, of the last LLM spans alone: carried (empty or not) through the
  // other spans' sort and de-duplication, they cost a third more.
  const spans = await backgroundRead<FactSpanRow>(
    ch,
    `
      SELECT trace_id, span_id, finish_reasons, if(operation = 'execute_tool', [tool_call_id, toString(tool_name), toString(status_code), tool_output], []) AS tool
      FROM ${ch.database}.spans
      WHERE ${spansWhere} AND (notEmpty(finish_reasons) OR operation = 'execute_tool')
      ORDER BY start_time
      LIMIT 1 BY trace_id, span_id`,
    range,
  );
  // TabSeparated: the message columns are JSON text, which JSONEachRow would escape quote by quote (and
  // JSON.parse unescape) while TabSeparated copies them as they are but for the rare tab, newline or backslash.
  const messages = await ch.client.query({
    query: `
      SELECT trace_id, span_id, system_instructions, input_messages, output_messages
      FROM ${ch.database}.spans
      WHERE ${spansWhere} AND span_id IN {lastLlm:Array(String)}
      LIMIT 1 BY trace_id, span_id`,
    query_params: { ...range, lastLlm: rollups.flatMap((row) => (row.last_llm_span_id ? [row.last_llm_span_id] : [])) },
    format: "TabSeparated",
  });
  const byTrace = new Map(rollups.map((row): [string, TraceSpans] => [row.trace_id, { finishReasons: [], tools: [], lastLlm: null, lastLlmFinished: false }]));
  const lastLlmOf = new Map(rollups.map((row) => [row.trace_id, row.last_llm_span_id]));
  // A span id is unique within its trace only: another trace's last LLM span may share it.
  const isLastLlm = (traceId: string, spanId: string) => spanId !== "" && spanId === lastLlmOf.get(traceId);
  for (const span of spans) {
    const trace = byTrace.get(span.trace_id)!;
    trace.finishReasons.push(...span.finish_reasons);
    if (span.tool.length) trace.tools.push(span.tool);
    if (span.finish_reasons.length && isLastLlm(span.trace_id, span.span_id)) trace.lastLlmFinished = true;
  }
  for (const [traceId, spanId, system_instructions, input_messages, output_messages] of await tabSeparatedRows(messages)) {
    if (isLastLlm(traceId!, spanId!)) byTrace.get(traceId!)!.lastLlm = { system_instructions: system_instructions!, input_messages: input_messages!, output_messages: output_messages! };
  }
  const lacking = rollups.filter((row) => row.last_llm_span_id && lacksMessages(byTrace.get(row.trace_id)!.lastLlm ?? noMessages));
  for (const [traceId, contents] of await logContentsOf(ch, organizationId, projectId, lacking, isLastLlm)) {
    const trace = byTrace.get(traceId)!;
    trace.lastLlm = withLogContents(trace.lastLlm ?? noMessages, contents);
    if (!trace.lastLlmFinished) trace.finishReasons.push(...contents.finish_reasons);
  }
  return rollups.map((row) => factsOf(organizationId, projectId, row, byTrace.get(row.trace_id)!));
}

const noMessages: MessageColumns = { system_instructions: "", input_messages: "", output_messages: "" };

/** What the log records sent for these traces' last LLM spans add to them, by trace (`logContents`, for many traces). */
async function logContentsOf(
  ch: ClickHouseStore,
  organizationId: string,
  projectId: string,
  rollups: TraceRollupRow[],
  isLastLlm: (traceId: string, spanId: string) => boolean,
): Promise<Map<string, LogContents>> {
  if (rollups.length === 0) return new Map();
  const result = await ch.client.query({
    query: `
      SELECT trace_id, span_id, system_instructions, input_messages, output_messages, toJSONString(finish_reasons)
      FROM ${ch.database}.span_contents FINAL
      WHERE organization_id = {organizationId:String} AND project_id = {projectId:String}
        AND trace_id IN {traceIds:Array(String)} AND span_id IN {spanIds:Array(String)}
      ORDER BY trace_id, span_id, record_time, record_index`,
    query_params: { organizationId, projectId, traceIds: rollups.map((row) => row.trace_id), spanIds: rollups.map((row) => row.last_llm_span_id) },
    format: "TabSeparated",
  });
  const records = (await tabSeparatedRows(result)).flatMap(([traceId, spanId, system_instructions, input_messages, output_messages, finishReasons]) =>
    isLastLlm(traceId!, spanId!)
      ? [{ traceId: traceId!, contents: { system_instructions: system_instructions!, input_messages: input_messages!, output_messages: output_messages!, finish_reasons: JSON.parse(finishReasons!) as string[] } }]
      : [],
  );
  return new Map([...Map.groupBy(records, (record) => record.traceId)].map(([traceId, ofTrace]) => [traceId, mergeLogContents(ofTrace.map((record) => record.contents))!]));
}

/**
 * A read of the detectors' background job. Not `ch.read`: its per-organization gate is for request
 * reads, and a scan holding it would make that organization's API reads queue and be refused.
 */
async function backgroundRead<T>(ch: ClickHouseStore, query: string, params: Record<string, unknown>): Promise<T[]> {
  const result = await ch.client.query({ query, query_params: params, format: "JSONEachRow" });
  return result.json<T>();
}

const tabSeparatedEscapes: Record<string, string> = { b: "\b", f: "\f", r: "\r", n: "\n", t: "\t", "0": "\0" };

/**
 * The fields of a TabSeparated result's rows, unescaped: a backslash escapes the character after it. The
 * rows come from the result's row stream, which decodes each line with `Buffer.toString`; `text()` decodes
 * with a `TextDecoder`, which under Bun takes tens of times longer for these megabytes of messages.
 */
async function tabSeparatedRows(result: ResultSet<"TabSeparated">): Promise<string[][]> {
  const unescape = (field: string) => (field.includes("\\") ? field.replace(/\\(.)/gs, (_, char: string) => tabSeparatedEscapes[char] ?? char) : field);
  const rows: string[][] = [];
  for await (const lines of result.stream()) for (const line of lines) rows.push(line.text.split("\t").map(unescape));
  return rows;
}

/** Builds a trace's facts from its roll-up and spans; the last LLM span's messages are its conversation. */
function factsOf(organizationId: string, projectId: string, rollup: TraceRollupRow, spans: TraceSpans): TraceFacts {
  const trace: ScoredTrace = {
    traceId: rollup.trace_id,
    sessionId: rollup.session_id && rollup.session_id.length <= maxSessionIdLength ? rollup.session_id : null,
    lastLlmSpanId: rollup.last_llm_span_id || null,
    startTime: rollup.start_time,
    endTime: rollup.end_time,
  };
  const conversation = conversationOf(spans.lastLlm);
  const toolCalls: ToolCall[] = [];
  const toolResults: ToolResult[] = [];
  conversation.forEach((message, messageIndex) => {
    for (const part of partsOf(message)) {
      if (part.type === "tool_call") toolCalls.push({ id: (part.id as string) ?? null, name: String(part.name ?? ""), arguments: part.arguments, messageIndex });
      if (part.type === "tool_call_response") toolResults.push({ id: (part.id as string) ?? null, name: null, response: part.response, messageIndex });
    }
  });
  // Tool executions recorded as spans count as results too (status error is a failed one).
  for (const [toolCallId, toolName, statusCode, toolOutput] of spans.tools) {
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
    finishReasons: spans.finishReasons,
    metrics: {
      durationMs: Number(rollup.duration_ms),
      cost: Number(rollup.cost),
      tokensInput: Number(rollup.tokens_input),
      tokensOutput: Number(rollup.tokens_output),
      tokensCacheRead: Number(rollup.tokens_cache_read),
      tokensCacheCreate: Number(rollup.tokens_cache_create),
      errorCount: Number(rollup.error_count),
      spanCount: Number(rollup.span_count),
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
