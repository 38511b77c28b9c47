/**
 * map: a decoded span to its `spans` row, by the field resolution of design/INGEST.md. This module holds
 * identity, grouping and the row itself; operation and provider, usage, and conversation resolve in
 * map-operation.ts, map-usage.ts and map-conversation.ts.
 */
import {
  AttributeReader,
  attributesToObject,
  attributeText,
  isRecord,
  parseJsonValue,
  setOwn,
  stringAttributes,
  typedAttributes,
  type AttributeValue,
  type Attributes,
} from "./attributes";
import type { DecodedEvent, DecodedLink, DecodedScope, DecodedSpan, DecodedTraces } from "./decode";
import { resolveConversation, resolveToolDefinitions } from "./map-conversation";
import { isVercelUsageWrapper, normalizeProvider, resolveOperation } from "./map-operation";
import { nanosBetween, resolveTimeToFirstToken, resolveTokens } from "./map-usage";
import { messagesText, type Message } from "./messages";
import type { SpanRow } from "./row";

/** Who a span belongs to: resolved by the receiver from the API key and project. */
export interface SpanOwner {
  organizationId: string;
  projectId: string;
  apiKeyId: string;
}

export interface MappedResource {
  serviceName: string;
  resourceString: Record<string, string>;
}

// Resolution lists of design/INGEST.md: the first attribute that yields a value wins.
const SESSION_ID = [
  "session.id",
  "gen_ai.session.id",
  "langfuse.session.id",
  "traceloop.association.properties.session_id",
  "langsmith.trace.session_id",
  "session_id",
  "ai.telemetry.metadata.sessionId",
  "ai.telemetry.metadata.threadId",
  "ai.settings.context.sessionId",
  "ai.settings.context.threadId",
  "gen_ai.conversation.id",
];
/** Attributes naming the end user, in resolution order; redaction governs them as identities. */
export const USER_ID = [
  "user.id",
  "gen_ai.request.user",
  "gen_ai.user",
  "traceloop.association.properties.user_id",
  "langsmith.metadata.user_id",
  "langfuse.user.id",
  "ai.telemetry.metadata.userId",
  "ai.settings.context.userId",
];
const SIMULATION_ID = ["latitude.simulation.id", "simulation.id"];
const PROVIDER = ["gen_ai.provider.name", "gen_ai.system", "llm.system", "llm.provider", "ai.model.provider"];
/** After `gen_ai.request.model`, OpenInference's requested model (`llm.invocation_parameters.model`) comes first: its `llm.model_name` is often the response's. */
const MODEL = ["llm.model_name", "ai.model.id", "embedding.model_name", "model", "langfuse.observation.model.name"];
const RESPONSE_MODEL = ["gen_ai.response.model", "ai.response.model", "llm.model_name", "langfuse.observation.model.name"];
const RESPONSE_ID = ["gen_ai.response.id", "ai.response.id"];
const TOOL_CALL_ID = ["gen_ai.tool.call.id", "ai.toolCall.id", "tool.id", "tool_call.id"];
const TOOL_NAME = ["gen_ai.tool.name", "ai.toolCall.name", "tool.name", "traceloop.entity.name"];
const TOOL_INPUT = ["gen_ai.tool.call.arguments", "ai.toolCall.args", "input.value", "traceloop.entity.input", "langfuse.observation.input"];
const TOOL_OUTPUT = ["gen_ai.tool.call.result", "ai.toolCall.result", "output.value", "traceloop.entity.output", "langfuse.observation.output"];
const FINISH_REASONS = ["gen_ai.response.finish_reasons", "ai.response.finishReason", "llm.finish_reason"];
/** OpenLLMetry sends `gen_ai.is_streaming` (older releases `llm.is_streaming`). */
const STREAMING_FLAGS = ["gen_ai.request.stream", "gen_ai.is_streaming", "llm.is_streaming"];
const METADATA_JSON = ["latitude.metadata", "metadata"];
const METADATA_PREFIXES = [
  "langfuse.trace.metadata.",
  "langfuse.observation.metadata.",
  "traceloop.association.properties.",
  "langsmith.metadata.",
  "ai.telemetry.metadata.",
  // `ai` 7 with `@ai-sdk/otel` sends the call's `runtimeContext` (the keys picked by `includeRuntimeContext`) here.
  "ai.settings.context.",
];

function stringList(value: AttributeValue | undefined, commaSeparated: boolean): string[] {
  const parsed = parseJsonValue(value ?? null);
  let items: unknown[];
  if (Array.isArray(parsed)) items = parsed;
  else if (typeof parsed === "string") items = commaSeparated ? parsed.split(",") : [parsed];
  else return [];
  const list: string[] = [];
  for (const item of items) {
    const entry = (typeof item === "string" ? item : item === null || item === undefined ? "" : JSON.stringify(item)).trim();
    if (entry !== "" && !list.includes(entry)) list.push(entry);
  }
  return list;
}

const TAG_SOURCES: [key: string, commaSeparated: boolean][] = [
  ["latitude.tags", false],
  ["langfuse.trace.tags", false],
  ["tag.tags", false],
  ["langsmith.span.tags", true],
];

function resolveTags(attributes: AttributeReader): string[] {
  for (const [key, commaSeparated] of TAG_SOURCES) {
    const tags = stringList(attributes.get(key), commaSeparated);
    if (tags.length > 0) {
      attributes.consume(key);
      return tags;
    }
  }
  return [];
}

/** Merged from every source; on a repeated key the earlier source wins. */
function resolveMetadata(attributes: AttributeReader): Record<string, string> {
  const metadata: Record<string, string> = {};
  const add = (key: string, value: unknown) => {
    if (value === null || value === undefined || Object.hasOwn(metadata, key)) return;
    setOwn(metadata, key, typeof value === "string" ? value : JSON.stringify(value));
  };
  for (const key of METADATA_JSON) {
    const value = attributes.get(key);
    const parsed = parseJsonValue(value);
    if (!isRecord(parsed)) continue;
    attributes.consume(key);
    for (const [entryKey, entryValue] of Object.entries(parsed)) add(entryKey, entryValue);
  }
  for (const prefix of METADATA_PREFIXES) for (const [key, value] of attributes.prefixed(prefix)) add(key, value);
  return metadata;
}

function resolveFinishReasons(attributes: AttributeReader, output: Message[]): string[] {
  const reasons = stringList(attributes.first(FINISH_REASONS), false);
  if (reasons.length > 0) return reasons;
  for (const message of output) if (message.finish_reason && !reasons.includes(message.finish_reason)) reasons.push(message.finish_reason);
  return reasons;
}

function resolveErrorType(attributes: AttributeReader, events: DecodedEvent[], statusCode: SpanRow["status_code"]): string {
  const errorType = attributes.text(["error.type"]);
  if (errorType || statusCode !== "error") return errorType;
  const exception = events.find((event) => event.name === "exception");
  return exception ? attributeText(exception.attributes.get("exception.type")) : "";
}


function resolveRetentionDays(attributes: AttributeReader): number {
  const days = attributes.number(["latitude.retention_days"]);
  return days === undefined || days < 1 ? 0 : Math.min(Math.trunc(days), 65535);
}

const jsonOrEmpty = (list: unknown[]) => (list.length === 0 ? "" : JSON.stringify(list));

const eventsJson = (events: DecodedEvent[]) =>
  jsonOrEmpty(events.map((event) => ({ name: event.name, timeUnixNano: event.timeUnixNano, attributes: attributesToObject(event.attributes) })));

const linksJson = (links: DecodedLink[]) =>
  jsonOrEmpty(
    links.map((link) => ({ traceId: link.traceId, spanId: link.spanId, traceState: link.traceState, flags: link.flags, attributes: attributesToObject(link.attributes) })),
  );

const jsonRecord = (value: AttributeValue | undefined) => {
  const parsed = parseJsonValue(value);
  return isRecord(parsed) ? parsed : undefined;
};
const textOf = (value: unknown) => (typeof value === "string" ? value : "");

/** The span's own flags, a streaming request, or a Vercel AI SDK streaming call (its wrapper as well as its `doStream` step). */
function isStreaming(attributes: AttributeReader, invocation: Record<string, unknown> | undefined): boolean {
  for (const key of STREAMING_FLAGS) if (attributes.boolean(key) === true) return true;
  if (attributeText(attributes.get("ai.settings.mode")) === "stream" || invocation?.stream === true) return true;
  const operationId = attributeText(attributes.get("ai.operationId"));
  return operationId === "ai.streamText" || operationId === "ai.streamObject" || operationId.endsWith(".doStream");
}

interface ToolCall {
  id: string;
  name: string;
  input: string;
  output: string;
}

const NO_TOOL_CALL: ToolCall = { id: "", name: "", input: "", output: "" };

/**
 * LangChain (through OpenInference) records a tool's result as the ToolMessage it returns, `{"output": {lc, kwargs:
 * {content, tool_call_id}}}`: the result is its content, and it alone names the call.
 */
function langChainToolMessage(output: string): { content: string; toolCallId: string } | undefined {
  if (!output.startsWith('{"output":')) return undefined;
  const message = jsonRecord(output)?.output;
  const kwargs = isRecord(message) && message.lc !== undefined && isRecord(message.kwargs) ? message.kwargs : undefined;
  if (!kwargs || kwargs.content === undefined) return undefined;
  return { content: textOf(kwargs.content) || JSON.stringify(kwargs.content), toolCallId: textOf(kwargs.tool_call_id) };
}

/** A tool observation of Langfuse is named by its span alone. */
function resolveToolCall(attributes: AttributeReader, spanName: string): ToolCall {
  let output = attributes.readContent(() => attributes.text(TOOL_OUTPUT));
  let id = attributes.text(TOOL_CALL_ID);
  const langChain = langChainToolMessage(output);
  if (langChain) {
    output = langChain.content;
    id ||= langChain.toolCallId;
  }
  const name = attributes.text(TOOL_NAME) || (attributes.has("langfuse.observation.type") ? spanName : "");
  return { id, name, input: attributes.readContent(() => attributes.text(TOOL_INPUT)), output };
}

export function mapResource(attributes: Attributes): MappedResource {
  return { serviceName: attributeText(attributes.get("service.name")), resourceString: stringAttributes(attributes) };
}

/**
 * One decoded span as a `spans` row. Cost columns stay zero until `priceSpan`; explicit cost attributes
 * (`gen_ai.usage.input_cost`, `llm.cost.*`) remain in the typed maps for it.
 */
export function mapSpan(span: DecodedSpan, resource: MappedResource, scope: DecodedScope, owner: SpanOwner): SpanRow {
  const attributes = new AttributeReader(span.attributes);
  const metadata = resolveMetadata(attributes);
  // OpenInference's request parameters and Langfuse's model parameters, as the provider API received them.
  const invocation = jsonRecord(attributes.get("llm.invocation_parameters")) ?? jsonRecord(attributes.get("langfuse.observation.model.parameters"));
  // LangChain (through OpenInference) names its provider and model only in its run metadata.
  const provider = normalizeProvider(attributes.text(PROVIDER) || (metadata.ls_provider ?? ""));
  const operation = resolveOperation(attributes);
  const tokens = resolveTokens(attributes, provider);
  const timeToFirstToken = resolveTimeToFirstToken(attributes, span.events, span.startTimeUnixNano);
  const isTool = operation === "execute_tool";
  const conversation = attributes.readContent(() => resolveConversation(attributes));
  const tool = isTool ? resolveToolCall(attributes, span.name) : NO_TOOL_CALL;
  const toolDefinitions = attributes.readContent(() => resolveToolDefinitions(attributes));
  const textLines = [messagesText(conversation.input.messages), messagesText(conversation.output.messages)].filter((lines) => lines !== "");

  const row: SpanRow = {
    organization_id: owner.organizationId,
    project_id: owner.projectId,
    trace_id: span.traceId,
    span_id: span.spanId,
    parent_span_id: span.parentSpanId,
    name: span.name,
    kind: span.kind,
    status_code: span.statusCode,
    status_message: span.statusMessage,
    trace_state: span.traceState,
    trace_flags: span.flags & 0xff,
    scope_name: scope.name,
    scope_version: scope.version,
    service_name: resource.serviceName,
    start_time: span.startTimeUnixNano,
    end_time: span.endTimeUnixNano,
    duration_ns: nanosBetween(span.startTimeUnixNano, span.endTimeUnixNano),
    api_key_id: owner.apiKeyId,
    operation,
    provider,
    model: attributes.text(["gen_ai.request.model"]) || textOf(invocation?.model) || attributes.text(MODEL) || (metadata.ls_model_name ?? ""),
    response_model: attributes.text(RESPONSE_MODEL),
    response_id: attributes.text(RESPONSE_ID),
    finish_reasons: resolveFinishReasons(attributes, conversation.output.messages),
    error_type: resolveErrorType(attributes, span.events, span.statusCode),
    session_id: attributes.text(SESSION_ID),
    user_id: attributes.text(USER_ID),
    simulation_id: attributes.text(SIMULATION_ID),
    tags: resolveTags(attributes),
    metadata,
    tokens_input: tokens.input,
    tokens_output: tokens.output,
    tokens_cache_read: tokens.cacheRead,
    tokens_cache_create: tokens.cacheCreate,
    tokens_reasoning: tokens.reasoning,
    cost_input_microcents: 0,
    cost_output_microcents: 0,
    cost_total_microcents: 0,
    cost_is_estimated: false,
    time_to_first_token_ns: timeToFirstToken,
    is_streaming: isStreaming(attributes, invocation) || timeToFirstToken > 0,
    is_usage_wrapper: isVercelUsageWrapper(attributes),
    tool_call_id: tool.id,
    tool_name: tool.name,
    tool_input: tool.input,
    tool_output: tool.output,
    defined_tools: [...new Set(toolDefinitions.map((tool) => tool.name))],
    tool_definitions: jsonOrEmpty(toolDefinitions),
    system_instructions: jsonOrEmpty(conversation.system),
    input_messages: conversation.input.json,
    output_messages: conversation.output.json,
    message_text: textLines.join("\n"),
    memory_store_id: attributes.text(["gen_ai.memory.store.id"]),
    memory_record_id: attributes.text(["gen_ai.memory.record.id"]),
    resource_string: { ...resource.resourceString },
    events_json: eventsJson(span.events),
    links_json: linksJson(span.links),
    retention_days: resolveRetentionDays(attributes),
    attr_string: {},
    attr_int: {},
    attr_float: {},
    attr_bool: {},
  };
  // Last: every attribute as sent, but those whose content a content column holds.
  return Object.assign(row, typedAttributes(span.attributes, attributes.content));
}

/** Every accepted span of a decoded request as rows, each resource mapped once. */
export function mapTraces(traces: DecodedTraces, owner: SpanOwner): SpanRow[] {
  const rows: SpanRow[] = [];
  for (const resourceSpans of traces.resourceSpans) {
    const resource = mapResource(resourceSpans.resource);
    for (const scopeSpans of resourceSpans.scopeSpans) for (const span of scopeSpans.spans) rows.push(mapSpan(span, resource, scopeSpans.scope, owner));
  }
  return rows;
}
