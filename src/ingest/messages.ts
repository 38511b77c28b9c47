import { isRecord } from "./attributes";

/**
 * GenAI semantic-convention message shapes (≥1.37), the one format messages are stored in whatever the
 * instrumentation sent: OpenAI/Anthropic/Vercel content blocks, OpenInference and Traceloop flattened keys.
 */
export interface MessagePart {
  type: string;
  [field: string]: unknown;
}

export interface Message {
  role: string;
  parts: MessagePart[];
  name?: string;
  finish_reason?: string;
}

export interface ToolDefinition {
  name: string;
  description: string;
  parameters: unknown;
}

const text = (value: unknown) => (typeof value === "string" ? value : value === undefined || value === null ? "" : JSON.stringify(value));
const optionalString = (value: unknown) => (typeof value === "string" && value !== "" ? value : undefined);

/**
 * JSON objects and arrays sent as strings (tool arguments, results, schemas) become values; other text stays. Tool
 * arguments and results so have one shape whatever the source sent.
 */
function parseJsonContainer(value: unknown): unknown {
  if (typeof value !== "string") return value;
  const first = value.trimStart()[0];
  if (first !== "{" && first !== "[") return value;
  try {
    return JSON.parse(value);
  } catch {
    return value;
  }
}

const textPart = (content: string): MessagePart => ({ type: "text", content });
const toolCallPart = (id: unknown, name: unknown, args: unknown): MessagePart => ({
  type: "tool_call",
  id: optionalString(id) ?? null,
  name: text(name),
  arguments: parseJsonContainer(args) ?? null,
});
const toolResponsePart = (id: unknown, response: unknown): MessagePart => ({
  type: "tool_call_response",
  id: optionalString(id) ?? null,
  response: parseJsonContainer(response) ?? null,
});

const modalityOf = (mimeType: string | undefined) =>
  mimeType?.startsWith("image/") ? "image" : mimeType?.startsWith("audio/") ? "audio" : mimeType?.startsWith("video/") ? "video" : "file";

function mediaPart(data: unknown, mimeType: string | undefined, defaultModality: string): MessagePart {
  const modality = mimeType ? modalityOf(mimeType) : defaultModality;
  if (typeof data === "string" && /^(https?|gs|s3):\/\//.test(data)) return { type: "uri", modality, ...(mimeType && { mime_type: mimeType }), uri: data };
  return { type: "blob", modality, ...(mimeType && { mime_type: mimeType }), content: text(data) };
}

/** Vercel AI SDK 5 wraps tool results as `{type: "json" | "text" | "error-text", value}`. */
const vercelToolOutput = (output: unknown) => (isRecord(output) && typeof output.type === "string" && "value" in output ? output.value : output);

/** One content block of any supported dialect as GenAI parts (a block may carry none); GenAI parts are kept as they are. */
export function normalizePart(block: unknown): MessagePart[] {
  if (typeof block === "string") return [textPart(block)];
  if (!isRecord(block)) return [];
  switch (block.type) {
    case "text":
      if (typeof block.content === "string") return [block as MessagePart];
      return [textPart(text(block.content ?? block.text))];
    case "input_text":
    case "output_text":
      return [textPart(text(block.text))];
    case "tool_call": {
      if (typeof block.name !== "string") return [toolCallPart(block.id, block.name, block.arguments)];
      const args = parseJsonContainer(block.arguments);
      return [args === block.arguments ? (block as MessagePart) : { ...block, type: "tool_call", arguments: args }];
    }
    case "tool-call":
      return [toolCallPart(block.toolCallId, block.toolName, block.input ?? block.args)];
    case "tool_use":
      return [toolCallPart(block.id, block.name, block.input)];
    case "function_call":
      return [toolCallPart(block.call_id ?? block.id, block.name, block.arguments)];
    case "tool_call_response": {
      const response = parseJsonContainer(block.response);
      return [response === block.response ? (block as MessagePart) : { ...block, type: "tool_call_response", response }];
    }
    case "tool-result":
      return [toolResponsePart(block.toolCallId, vercelToolOutput(block.output ?? block.result))];
    case "tool_result":
      return [toolResponsePart(block.tool_use_id, block.content)];
    case "function_call_output":
      return [toolResponsePart(block.call_id, block.output)];
    case "reasoning":
      if (typeof block.content === "string") return [block as MessagePart];
      return [{ type: "reasoning", content: text(block.content ?? block.text) }];
    case "thinking":
      return [{ type: "reasoning", content: text(block.thinking ?? block.text) }];
    case "image_url": {
      const url = isRecord(block.image_url) ? block.image_url.url : block.image_url;
      return [mediaPart(url, undefined, "image")];
    }
    case "image": {
      if (isRecord(block.source)) {
        const source = block.source;
        return [mediaPart(source.url ?? source.data, optionalString(source.media_type), "image")];
      }
      return [mediaPart(block.image ?? block.url, optionalString(block.mediaType ?? block.mimeType), "image")];
    }
    case "file":
      if ("data" in block) return [mediaPart(block.data, optionalString(block.mediaType ?? block.mimeType), "file")];
      return [block as MessagePart];
    default:
      return typeof block.type === "string" ? [block as MessagePart] : [{ type: "generic", content: block }];
  }
}

function contentParts(content: unknown): MessagePart[] {
  if (content === undefined || content === null || content === "") return [];
  if (typeof content === "string") {
    // Traceloop sends multimodal content as a JSON array string.
    const parsed = content[0] === "[" ? parseJsonContainer(content) : content;
    return Array.isArray(parsed) ? parsed.flatMap(normalizePart) : [textPart(content)];
  }
  if (Array.isArray(content)) return content.flatMap(normalizePart);
  return normalizePart(content);
}

/** OpenAI-style `tool_calls: [{id, function: {name, arguments}}]` (also flattened Traceloop `{id, name, arguments}`). */
function toolCallParts(toolCalls: unknown): MessagePart[] {
  if (!Array.isArray(toolCalls)) return [];
  return toolCalls.filter(isRecord).map((call) => {
    const fn = isRecord(call.function) ? call.function : call;
    return toolCallPart(call.id ?? call.toolCallId, fn.name ?? call.toolName, fn.arguments ?? call.args ?? call.input);
  });
}

/** A message of any supported dialect as a GenAI message, or null when it is not a message at all. */
function normalizeMessage(raw: unknown, defaultRole: string): Message | null {
  if (typeof raw === "string") return { role: defaultRole, parts: [textPart(raw)] };
  if (!isRecord(raw)) return null;
  const role = optionalString(raw.role) ?? defaultRole;
  let parts: MessagePart[];
  if (Array.isArray(raw.parts)) {
    parts = raw.parts.flatMap(normalizePart);
    if (role === raw.role && parts.length === raw.parts.length && parts.every((part, index) => part === (raw.parts as unknown[])[index])) return raw as unknown as Message;
  } else {
    const toolCallId = raw.tool_call_id ?? raw.toolCallId;
    parts =
      role === "tool" && !Array.isArray(raw.content)
        ? [toolResponsePart(toolCallId, raw.content)]
        : contentParts(raw.content);
    parts.push(...toolCallParts(raw.tool_calls ?? raw.toolCalls));
    if (isRecord(raw.function_call)) parts.push(toolCallPart(undefined, raw.function_call.name, raw.function_call.arguments));
  }
  const message: Message = { role, parts };
  const name = optionalString(raw.name);
  if (name) message.name = name;
  const finishReason = optionalString(raw.finish_reason ?? raw.finishReason);
  if (finishReason) message.finish_reason = finishReason;
  return message;
}

/** GenAI messages with the JSON they are stored as ("" when there are none). */
export interface StoredMessages {
  messages: Message[];
  json: string;
}

export const storedMessages = (messages: Message[]): StoredMessages => ({ messages, json: messages.length === 0 ? "" : JSON.stringify(messages) });

/**
 * A list of messages (JSON string, array, or a single message) as GenAI messages. When the sender's JSON
 * string already holds canonical GenAI messages it is stored as sent, saving a serialization.
 */
export function normalizeMessages(value: unknown, defaultRole: string): StoredMessages {
  const parsed = parseJsonContainer(value);
  const list = Array.isArray(parsed) ? parsed : parsed === undefined || parsed === null || parsed === "" ? [] : [parsed];
  const messages: Message[] = [];
  let unchanged = Array.isArray(parsed);
  for (const raw of list) {
    const message = normalizeMessage(raw, defaultRole);
    if (message) messages.push(message);
    if (message !== raw) unchanged = false;
  }
  if (unchanged && typeof value === "string" && messages.length > 0) return { messages, json: value };
  return storedMessages(messages);
}

/** `gen_ai.system_instructions`: parts as JSON or structure, or plain text. */
export function normalizeSystemInstructions(value: unknown): MessagePart[] {
  const parsed = parseJsonContainer(value);
  if (typeof parsed === "string") return parsed === "" ? [] : [textPart(parsed)];
  if (Array.isArray(parsed)) return parsed.flatMap(normalizePart);
  if (isRecord(parsed) && Array.isArray(parsed.parts)) return parsed.parts.flatMap(normalizePart);
  return normalizePart(parsed);
}

/** Items of a flattened list, by numeric key order (`{"0": …, "1": …}` as produced by `unflatten`). */
function indexedItems(value: unknown): unknown[] {
  if (Array.isArray(value)) return value;
  if (!isRecord(value)) return [];
  return Object.keys(value)
    .filter((key) => /^\d+$/.test(key))
    .sort((a, b) => Number(a) - Number(b))
    .map((key) => value[key]);
}

/** OpenInference `llm.{input,output}_messages.N.message.*`, already unflattened by index. */
export function openInferenceMessages(flattened: unknown, defaultRole: string): Message[] {
  const messages: Message[] = [];
  for (const item of indexedItems(flattened)) {
    const message = isRecord(item) && isRecord(item.message) ? item.message : null;
    if (!message) continue;
    const role = optionalString(message.role) ?? defaultRole;
    const parts: MessagePart[] = [];
    const toolCallId = message.tool_call_id;
    if (role === "tool") parts.push(toolResponsePart(toolCallId, message.content));
    else if (message.content !== undefined) parts.push(...contentParts(message.content));
    for (const content of indexedItems(message.contents)) {
      const block = isRecord(content) && isRecord(content.message_content) ? content.message_content : null;
      if (!block) continue;
      if (block.type === "image") {
        const image = isRecord(block.image) && isRecord(block.image.image) ? block.image.image.url : undefined;
        parts.push(mediaPart(image, undefined, "image"));
      } else parts.push(textPart(text(block.text)));
    }
    for (const call of indexedItems(message.tool_calls)) {
      const toolCall = isRecord(call) && isRecord(call.tool_call) ? call.tool_call : null;
      if (!toolCall) continue;
      const fn = isRecord(toolCall.function) ? toolCall.function : {};
      parts.push(toolCallPart(toolCall.id, fn.name, fn.arguments));
    }
    const normalized: Message = { role, parts };
    const name = optionalString(message.name);
    if (name) normalized.name = name;
    messages.push(normalized);
  }
  return messages;
}

/** Traceloop's deprecated `gen_ai.prompt.N.*` / `gen_ai.completion.N.*`, already unflattened by index. */
export function indexedMessages(flattened: unknown, defaultRole: string): Message[] {
  const messages: Message[] = [];
  for (const item of indexedItems(flattened)) {
    if (!isRecord(item)) continue;
    const message = normalizeMessage({ ...item, tool_calls: indexedItems(item.tool_calls) }, defaultRole);
    if (message) messages.push(message);
  }
  return messages;
}

/** Vercel AI SDK output: `ai.response.text`, `ai.response.reasoning` and `ai.response.toolCalls` as one assistant message. */
export function vercelOutputMessages(responseText: unknown, reasoning: unknown, toolCalls: unknown, finishReason: string): Message[] {
  const parts: MessagePart[] = [];
  if (typeof reasoning === "string" && reasoning !== "") parts.push({ type: "reasoning", content: reasoning });
  if (responseText !== undefined && responseText !== null && responseText !== "") parts.push(textPart(text(responseText)));
  const calls = parseJsonContainer(toolCalls);
  if (Array.isArray(calls)) parts.push(...toolCallParts(calls));
  if (parts.length === 0) return [];
  const message: Message = { role: "assistant", parts };
  if (finishReason) message.finish_reason = finishReason;
  return [message];
}

/** Vercel AI SDK wrapper spans: `ai.prompt` is `{system?, prompt?, messages?}`. */
export function vercelPrompt(value: unknown): { system: MessagePart[]; messages: StoredMessages } {
  const prompt = parseJsonContainer(value);
  if (!isRecord(prompt)) return { system: [], messages: normalizeMessages(prompt, "user") };
  const system = typeof prompt.system === "string" && prompt.system !== "" ? [textPart(prompt.system)] : [];
  const messages = prompt.messages !== undefined ? normalizeMessages(prompt.messages, "user") : normalizeMessages(prompt.prompt, "user");
  return { system, messages };
}

/**
 * One tool definition of any dialect: GenAI/OpenAI Responses `{name, description, parameters}`, OpenAI Chat
 * `{type: "function", function: {…}}`, Anthropic `input_schema`, Vercel `inputSchema`. Built-in tools without a
 * name (e.g. `{type: "web_search"}`) are named by their type.
 */
function normalizeToolDefinition(raw: unknown): ToolDefinition | null {
  const definition = parseJsonContainer(raw);
  if (!isRecord(definition)) return null;
  const fn = isRecord(definition.function) ? definition.function : definition;
  const name = optionalString(fn.name) ?? (definition.type !== "function" ? optionalString(definition.type) : undefined);
  if (!name) return null;
  const parameters = fn.parameters ?? fn.input_schema ?? fn.inputSchema ?? fn.parametersJsonSchema ?? fn.json_schema ?? null;
  return { name, description: text(fn.description), parameters: parseJsonContainer(parameters) };
}

export function normalizeToolDefinitions(value: unknown): ToolDefinition[] {
  const parsed = parseJsonContainer(value);
  const list = Array.isArray(parsed) ? parsed : isRecord(parsed) ? [parsed] : [];
  const definitions: ToolDefinition[] = [];
  for (const item of list) {
    const definition = normalizeToolDefinition(item);
    if (definition) definitions.push(definition);
  }
  return definitions;
}

/** Plain text of the text parts, one line per part: what full-text search indexes. */
export function messagesText(messages: Message[]): string {
  const lines: string[] = [];
  for (const message of messages) for (const part of message.parts) if (part.type === "text" && typeof part.content === "string" && part.content !== "") lines.push(part.content);
  return lines.join("\n");
}
