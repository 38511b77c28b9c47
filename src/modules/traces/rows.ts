import type { GenAiMessage, Span, SpanDetail, SpanKind, SpanStatusCode, ToolDefinition, Trace } from "./model";

/** A row of the trace relation with the Trace item columns (relation.ts `traceItemColumns`). */
export interface TraceItemRow {
  trace_id: string;
  start_time: string;
  end_time: string;
  duration_ns: number;
  span_count: number;
  error_count: number;
  tokens_input: number;
  tokens_output: number;
  tokens_cache_read: number;
  tokens_cache_create: number;
  tokens_reasoning: number;
  tokens_total: number;
  cost_input_microcents: number;
  cost_output_microcents: number;
  cost_total_microcents: number;
  session_id: string | null;
  user_id: string | null;
  simulation_id: string | null;
  root_span_id: string | null;
  root_span_name: string | null;
  tags: string[];
  models: string[];
  providers: string[];
  service_names: string[];
  time_to_first_token_ns: number;
}

export interface AnnotationCounts {
  positive: number;
  negative: number;
}

const sorted = (values: string[]) => [...values].sort();

export function toTrace(organizationId: string, projectId: string, row: TraceItemRow, annotations?: AnnotationCounts): Trace {
  return {
    organizationId,
    projectId,
    traceId: row.trace_id,
    spanCount: row.span_count,
    errorCount: row.error_count,
    startTime: row.start_time,
    endTime: row.end_time,
    durationNs: row.duration_ns,
    timeToFirstTokenNs: row.time_to_first_token_ns,
    tokensInput: row.tokens_input,
    tokensOutput: row.tokens_output,
    tokensCacheRead: row.tokens_cache_read,
    tokensCacheCreate: row.tokens_cache_create,
    tokensReasoning: row.tokens_reasoning,
    tokensTotal: row.tokens_total,
    costInputMicrocents: row.cost_input_microcents,
    costOutputMicrocents: row.cost_output_microcents,
    costTotalMicrocents: row.cost_total_microcents,
    sessionId: row.session_id || null,
    userId: row.user_id || null,
    simulationId: row.simulation_id || null,
    tags: sorted(row.tags),
    models: sorted(row.models),
    providers: sorted(row.providers),
    serviceNames: sorted(row.service_names),
    rootSpanId: row.root_span_id || null,
    rootSpanName: row.root_span_name ?? null,
    positiveAnnotationCount: annotations?.positive ?? 0,
    negativeAnnotationCount: annotations?.negative ?? 0,
  };
}

/** Span columns of a list item: everything but message content and attribute maps. */
export const spanItemColumns = [
  "organization_id",
  "project_id",
  "trace_id",
  "span_id",
  "parent_span_id",
  "session_id",
  "user_id",
  "simulation_id",
  "api_key_id",
  "start_time",
  "end_time",
  "name",
  "service_name",
  "kind",
  "status_code",
  "status_message",
  "trace_flags",
  "trace_state",
  "error_type",
  "tags",
  "operation",
  "provider",
  "model",
  "response_model",
  "tokens_input",
  "tokens_output",
  "tokens_cache_read",
  "tokens_cache_create",
  "tokens_reasoning",
  "cost_input_microcents",
  "cost_output_microcents",
  "cost_total_microcents",
  "cost_is_estimated",
  "time_to_first_token_ns",
  "is_streaming",
  "response_id",
  "finish_reasons",
  "scope_name",
  "scope_version",
  "retention_days",
  "ingested_at",
] as const;

export const spanDetailColumns = [
  ...spanItemColumns,
  "metadata",
  "system_instructions",
  "input_messages",
  "output_messages",
  "tool_definitions",
  "tool_call_id",
  "tool_name",
  "tool_input",
  "tool_output",
  "attr_string",
  "attr_int",
  "attr_float",
  "attr_bool",
  "resource_string",
  "events_json",
  "links_json",
] as const;

export interface SpanItemRow {
  organization_id: string;
  project_id: string;
  trace_id: string;
  span_id: string;
  parent_span_id: string;
  session_id: string;
  user_id: string;
  simulation_id: string;
  api_key_id: string;
  start_time: string;
  end_time: string;
  name: string;
  service_name: string;
  kind: string;
  status_code: string;
  status_message: string;
  trace_flags: number;
  trace_state: string;
  error_type: string;
  tags: string[];
  operation: string;
  provider: string;
  model: string;
  response_model: string;
  tokens_input: number;
  tokens_output: number;
  tokens_cache_read: number;
  tokens_cache_create: number;
  tokens_reasoning: number;
  cost_input_microcents: number;
  cost_output_microcents: number;
  cost_total_microcents: number;
  cost_is_estimated: boolean;
  time_to_first_token_ns: number;
  is_streaming: boolean;
  response_id: string;
  finish_reasons: string[];
  scope_name: string;
  scope_version: string;
  retention_days: number;
  ingested_at: string;
}

export interface SpanDetailRow extends SpanItemRow {
  metadata: Record<string, string>;
  system_instructions: string;
  input_messages: string;
  output_messages: string;
  tool_definitions: string;
  tool_call_id: string;
  tool_name: string;
  tool_input: string;
  tool_output: string;
  attr_string: Record<string, string>;
  attr_int: Record<string, number>;
  attr_float: Record<string, number>;
  attr_bool: Record<string, boolean>;
  resource_string: Record<string, string>;
  events_json: string;
  links_json: string;
}

const orNull = (value: string) => (value === "" ? null : value);
const kinds: readonly string[] = ["unspecified", "internal", "server", "client", "producer", "consumer"];
const statuses: readonly string[] = ["unset", "ok", "error"];

export function toSpan(row: SpanItemRow): Span {
  const span: Span = {
    organizationId: row.organization_id,
    projectId: row.project_id,
    traceId: row.trace_id,
    spanId: row.span_id,
    parentSpanId: orNull(row.parent_span_id),
    sessionId: orNull(row.session_id),
    userId: orNull(row.user_id),
    simulationId: orNull(row.simulation_id),
    apiKeyId: orNull(row.api_key_id),
    startTime: row.start_time,
    endTime: row.end_time,
    name: row.name,
    serviceName: row.service_name,
    kind: (kinds.includes(row.kind) ? row.kind : "unspecified") as SpanKind,
    statusCode: (statuses.includes(row.status_code) ? row.status_code : "unset") as SpanStatusCode,
    statusMessage: row.status_message,
    traceFlags: row.trace_flags,
    traceState: row.trace_state,
    errorType: orNull(row.error_type),
    tags: row.tags,
    operation: row.operation,
    provider: orNull(row.provider),
    model: orNull(row.model),
    responseModel: orNull(row.response_model),
    tokensInput: row.tokens_input,
    tokensOutput: row.tokens_output,
    tokensCacheRead: row.tokens_cache_read,
    tokensCacheCreate: row.tokens_cache_create,
    tokensReasoning: row.tokens_reasoning,
    costInputMicrocents: row.cost_input_microcents,
    costOutputMicrocents: row.cost_output_microcents,
    costTotalMicrocents: row.cost_total_microcents,
    costIsEstimated: row.cost_is_estimated,
    timeToFirstTokenNs: row.time_to_first_token_ns,
    isStreaming: row.is_streaming,
    responseId: orNull(row.response_id),
    finishReasons: row.finish_reasons,
    scopeName: row.scope_name,
    scopeVersion: row.scope_version,
    ingestedAt: row.ingested_at,
  };
  if (row.retention_days > 0) span.retentionDays = row.retention_days;
  return span;
}

/** Parses a stored JSON array column; "" (not captured) and anything but an array of objects read as []. */
export function jsonObjects(text: string): Record<string, unknown>[] {
  if (!text) return [];
  try {
    const parsed: unknown = JSON.parse(text);
    return Array.isArray(parsed) ? parsed.filter((item): item is Record<string, unknown> => typeof item === "object" && item !== null && !Array.isArray(item)) : [];
  } catch {
    return [];
  }
}

function toolDefinitions(text: string): ToolDefinition[] {
  return jsonObjects(text).flatMap((tool) => {
    // Some instrumentations nest the definition as {type: "function", function: {...}}.
    const definition = (typeof tool.function === "object" && tool.function !== null ? tool.function : tool) as Record<string, unknown>;
    if (typeof definition.name !== "string") return [];
    const parameters = definition.parameters ?? definition.input_schema ?? null;
    return [{ name: definition.name, description: typeof definition.description === "string" ? definition.description : "", parameters }];
  });
}

export function toSpanDetail(row: SpanDetailRow): SpanDetail {
  return {
    ...toSpan(row),
    metadata: row.metadata,
    systemInstructions: jsonObjects(row.system_instructions),
    inputMessages: jsonObjects(row.input_messages) as GenAiMessage[],
    outputMessages: jsonObjects(row.output_messages) as GenAiMessage[],
    toolDefinitions: toolDefinitions(row.tool_definitions),
    toolCallId: row.tool_call_id,
    toolName: row.tool_name,
    toolInput: row.tool_input,
    toolOutput: row.tool_output,
    attrString: row.attr_string,
    attrInt: row.attr_int,
    attrFloat: row.attr_float,
    attrBool: row.attr_bool,
    resourceString: row.resource_string,
    eventsJson: row.events_json,
    linksJson: row.links_json,
  };
}

/** The conversation of a trace from its last LLM-completion span: system instructions, input, output. */
export function conversationOf(span: { system_instructions: string; input_messages: string; output_messages: string } | null): GenAiMessage[] {
  if (!span) return [];
  const system = jsonObjects(span.system_instructions);
  return [
    ...(system.length ? [{ role: "system", parts: system }] : []),
    ...jsonObjects(span.input_messages),
    ...jsonObjects(span.output_messages),
  ];
}
