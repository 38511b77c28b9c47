import { attributeText, isRecord, parseJsonValue, type AttributeReader, type AttributeValue } from "./attributes";
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

/**
 * Each side from the first family that has it: GenAI ≥1.37, OpenInference, Vercel AI SDK, Langfuse generations,
 * deprecated GenAI. Whatever the family, leading system messages of the input are system instructions (`hoistSystem`).
 */
export function resolveConversation(attributes: AttributeReader): Conversation {
  const vercelWrapperPrompt = attributes.has("ai.prompt.messages") ? undefined : take(attributes, "ai.prompt");
  const wrapperPrompt = vercelWrapperPrompt === undefined ? undefined : vercelPrompt(vercelWrapperPrompt);

  const systemInstructions = take(attributes, "gen_ai.system_instructions");
  const system = systemInstructions !== undefined ? normalizeSystemInstructions(systemInstructions) : (wrapperPrompt?.system ?? []);
  const langfuse = attributeText(attributes.get("langfuse.observation.type")) === "generation";

  return hoistSystem({ system, input: resolveInput(attributes, wrapperPrompt?.messages, langfuse), output: resolveOutput(attributes, langfuse) });
}

/**
 * The one rule for system instructions: an input that starts with system (or OpenAI `developer`) messages has them
 * moved to the system instructions, after those the span sent apart and without repeating them.
 */
export function hoistSystem(conversation: Conversation): Conversation {
  const messages = conversation.input.messages;
  let leading = 0;
  while (leading < messages.length && SYSTEM_ROLES.has(messages[leading].role)) leading++;
  if (leading === 0) return conversation;
  const system = [...conversation.system];
  const known = new Set(system.map((part) => JSON.stringify(part)));
  for (const message of messages.slice(0, leading)) {
    for (const part of message.parts) {
      const key = JSON.stringify(part);
      if (known.has(key)) continue;
      known.add(key);
      system.push(part);
    }
  }
  return { system, input: storedMessages(messages.slice(leading)), output: conversation.output };
}

const SYSTEM_ROLES = new Set(["system", "developer"]);

/** Langfuse generation input: a message list, or the request `{messages, tools, …}`; its output one message or text. */
function langfuseMessages(value: AttributeValue, defaultRole: string): StoredMessages {
  const parsed = parseJsonValue(value);
  return normalizeMessages(isRecord(parsed) && Array.isArray(parsed.messages) ? parsed.messages : parsed, defaultRole);
}

function resolveInput(attributes: AttributeReader, wrapperMessages: StoredMessages | undefined, langfuse: boolean): StoredMessages {
  const genAi = take(attributes, "gen_ai.input.messages");
  if (genAi !== undefined) return normalizeMessages(genAi, "user");
  const openInference = attributes.unflatten("llm.input_messages.");
  if (openInference) return storedMessages(openInferenceMessages(openInference, "user"));
  const vercel = take(attributes, "ai.prompt.messages");
  if (vercel !== undefined) return normalizeMessages(vercel, "user");
  if (wrapperMessages) return wrapperMessages;
  const langfuseInput = langfuse ? take(attributes, "langfuse.observation.input") : undefined;
  if (langfuseInput !== undefined) return langfuseMessages(langfuseInput, "user");
  const deprecated = attributes.unflatten("gen_ai.prompt.");
  if (deprecated) return storedMessages(indexedMessages(deprecated, "user"));
  const deprecatedSingle = take(attributes, "gen_ai.prompt");
  return deprecatedSingle !== undefined ? normalizeMessages(deprecatedSingle, "user") : storedMessages([]);
}

function resolveOutput(attributes: AttributeReader, langfuse: boolean): StoredMessages {
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
  const langfuseOutput = langfuse ? take(attributes, "langfuse.observation.output") : undefined;
  if (langfuseOutput !== undefined) return langfuseMessages(langfuseOutput, "assistant");
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
  if (traceloop) return normalizeToolDefinitions(Object.values(traceloop));
  const langfuseInput = attributeText(attributes.get("langfuse.observation.type")) === "generation" ? parseJsonValue(attributes.get("langfuse.observation.input")) : undefined;
  return isRecord(langfuseInput) && Array.isArray(langfuseInput.tools) ? normalizeToolDefinitions(langfuseInput.tools) : [];
}
