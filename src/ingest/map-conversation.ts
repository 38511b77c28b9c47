import { attributeText, isRecord, type AttributeReader, type AttributeValue } from "./attributes";
import {
  indexedMessages,
  normalizeMessages,
  normalizeSystemInstructions,
  normalizeToolDefinitions,
  openInferenceMessages,
  storedMessages,
  vercelOutputMessages,
  vercelPrompt,
  type MessagePart,
  type StoredMessages,
  type ToolDefinition,
} from "./messages";

/** Takes the value of `key` when present, consuming it. */
function take(attributes: AttributeReader, key: string): AttributeValue | undefined {
  const value = attributes.get(key);
  if (value === undefined || value === null || value === "") return undefined;
  attributes.consume(key);
  return value;
}

export interface Conversation {
  system: MessagePart[];
  input: StoredMessages;
  output: StoredMessages;
}

/** Each side from the first family that has it: GenAI ≥1.37, OpenInference, Vercel AI SDK, deprecated GenAI. */
export function resolveConversation(attributes: AttributeReader): Conversation {
  const vercelWrapperPrompt = attributes.has("ai.prompt.messages") ? undefined : take(attributes, "ai.prompt");
  const wrapperPrompt = vercelWrapperPrompt === undefined ? undefined : vercelPrompt(vercelWrapperPrompt);

  const systemInstructions = take(attributes, "gen_ai.system_instructions");
  const system = systemInstructions !== undefined ? normalizeSystemInstructions(systemInstructions) : (wrapperPrompt?.system ?? []);

  return { system, input: resolveInput(attributes, wrapperPrompt?.messages), output: resolveOutput(attributes) };
}

function resolveInput(attributes: AttributeReader, wrapperMessages: StoredMessages | undefined): StoredMessages {
  const genAi = take(attributes, "gen_ai.input.messages");
  if (genAi !== undefined) return normalizeMessages(genAi, "user");
  const openInference = attributes.unflatten("llm.input_messages.");
  if (openInference) return storedMessages(openInferenceMessages(openInference, "user"));
  const vercel = take(attributes, "ai.prompt.messages");
  if (vercel !== undefined) return normalizeMessages(vercel, "user");
  if (wrapperMessages) return wrapperMessages;
  const deprecated = attributes.unflatten("gen_ai.prompt.");
  if (deprecated) return storedMessages(indexedMessages(deprecated, "user"));
  const deprecatedSingle = take(attributes, "gen_ai.prompt");
  return deprecatedSingle !== undefined ? normalizeMessages(deprecatedSingle, "user") : storedMessages([]);
}

function resolveOutput(attributes: AttributeReader): StoredMessages {
  const genAi = take(attributes, "gen_ai.output.messages");
  if (genAi !== undefined) return normalizeMessages(genAi, "assistant");
  const openInference = attributes.unflatten("llm.output_messages.");
  if (openInference) return storedMessages(openInferenceMessages(openInference, "assistant"));
  const text = take(attributes, "ai.response.text") ?? take(attributes, "ai.response.object");
  const reasoning = take(attributes, "ai.response.reasoning");
  const toolCalls = take(attributes, "ai.response.toolCalls");
  if (text !== undefined || reasoning !== undefined || toolCalls !== undefined) {
    return storedMessages(vercelOutputMessages(text, reasoning, toolCalls, attributeText(attributes.get("ai.response.finishReason"))));
  }
  const deprecated = attributes.unflatten("gen_ai.completion.");
  if (deprecated) return storedMessages(indexedMessages(deprecated, "assistant"));
  const deprecatedSingle = take(attributes, "gen_ai.completion");
  return deprecatedSingle !== undefined ? normalizeMessages(deprecatedSingle, "assistant") : storedMessages([]);
}

export function resolveToolDefinitions(attributes: AttributeReader): ToolDefinition[] {
  const genAi = take(attributes, "gen_ai.tool.definitions");
  if (genAi !== undefined) return normalizeToolDefinitions(genAi);
  const openInference = attributes.unflatten("llm.tools.");
  if (openInference) return Object.values(openInference).flatMap((tool) => (isRecord(tool) && isRecord(tool.tool) ? normalizeToolDefinitions(tool.tool.json_schema) : []));
  const vercel = take(attributes, "ai.prompt.tools");
  if (vercel !== undefined) return normalizeToolDefinitions(Array.isArray(vercel) ? vercel : [vercel]);
  const traceloop = attributes.unflatten("llm.request.functions.");
  return traceloop ? normalizeToolDefinitions(Object.values(traceloop)) : [];
}
