/**
 * map (logs): a GenAI event log record to the messages it carries for the span it names. The official
 * OpenTelemetry GenAI instrumentations, in their default content mode, send a call's messages as log records
 * instead of span attributes:
 * - `gen_ai.client.inference.operation.details` (semantic conventions ≥1.37): `gen_ai.system_instructions`,
 *   `gen_ai.input.messages`, `gen_ai.output.messages` as attributes (or in a structured body);
 * - the older per-message events, content in the body: `gen_ai.system.message` `{content}`, `gen_ai.user.message`
 *   `{content}`, `gen_ai.assistant.message` `{content, tool_calls}`, `gen_ai.tool.message` `{content, id}`,
 *   `gen_ai.choice` `{index, finish_reason, message: {role, content, tool_calls}}`.
 * The same rules as for spans apply (map-conversation.ts): leading system messages are system instructions.
 */
import { AttributeReader, isRecord, parseJsonValue, type Attributes, type AttributeValue } from "./attributes";
import type { DecodedLogRecord } from "./decode-logs";
import { hoistSystem, resolveConversation } from "./map-conversation";
import { normalizeMessages, normalizeSystemInstructions, storedMessages, type Message, type MessagePart } from "./messages";

export interface LogContent {
  system: MessagePart[];
  input: Message[];
  output: Message[];
  finishReasons: string[];
}

const OPERATION_DETAILS = "gen_ai.client.inference.operation.details";
const CONTENT_ATTRIBUTES = ["gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions"];

/** The record's body as an object (a structured body, or one sent as a JSON string). */
function bodyObject(body: AttributeValue): Record<string, unknown> {
  const parsed = parseJsonValue(body);
  return isRecord(parsed) ? parsed : {};
}

const input = (message: Record<string, unknown>): LogContent => ({ system: [], input: normalizeMessages(message, "user").messages, output: [], finishReasons: [] });

function operationDetails(attributes: Attributes, body: Record<string, unknown>): LogContent {
  const values: Attributes = new Map(attributes);
  for (const key of CONTENT_ATTRIBUTES) if (!values.has(key) && body[key] !== undefined) values.set(key, body[key] as AttributeValue);
  const reader = new AttributeReader(values);
  const conversation = resolveConversation(reader);
  const reasons = parseJsonValue(values.get("gen_ai.response.finish_reasons"));
  return {
    system: conversation.system,
    input: conversation.input.messages,
    output: conversation.output.messages,
    finishReasons: Array.isArray(reasons) ? reasons.filter((reason): reason is string => typeof reason === "string") : [],
  };
}

function messageEvent(eventName: string, body: Record<string, unknown>): LogContent | null {
  switch (eventName) {
    case "gen_ai.system.message":
      return { system: normalizeSystemInstructions(body.content), input: [], output: [], finishReasons: [] };
    case "gen_ai.user.message":
      return input({ role: body.role ?? "user", content: body.content });
    case "gen_ai.assistant.message":
      return input({ role: body.role ?? "assistant", content: body.content, tool_calls: body.tool_calls });
    case "gen_ai.tool.message":
      return input({ role: body.role ?? "tool", content: body.content, tool_call_id: body.id ?? null });
    case "gen_ai.choice": {
      const message = isRecord(body.message) ? body.message : {};
      const finishReason = typeof body.finish_reason === "string" ? body.finish_reason : "";
      const output = normalizeMessages({ ...message, role: message.role ?? "assistant", finish_reason: finishReason || undefined }, "assistant").messages;
      return { system: [], input: [], output, finishReasons: finishReason ? [finishReason] : [] };
    }
    default:
      return null;
  }
}

/** The messages a log record carries for its span; null when it is no GenAI event or carries none. */
export function mapLogRecord(record: DecodedLogRecord): LogContent | null {
  const body = bodyObject(record.body);
  const isDetails = record.eventName === OPERATION_DETAILS || CONTENT_ATTRIBUTES.some((key) => record.attributes.has(key));
  const content = isDetails ? operationDetails(record.attributes, body) : messageEvent(record.eventName, body);
  if (!content) return null;
  // A record holding only system messages (an older event, or a details record sent so) keeps them as instructions.
  const hoisted = hoistSystem({ system: content.system, input: storedMessages(content.input), output: storedMessages(content.output) });
  const hasParts = (message: Message) => message.parts.length > 0;
  const result = { ...content, system: hoisted.system, input: hoisted.input.messages.filter(hasParts), output: content.output.filter(hasParts) };
  return result.system.length + result.input.length + result.output.length > 0 ? result : null;
}
