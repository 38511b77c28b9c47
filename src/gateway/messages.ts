import type { ModelMessage } from "ai";

/**
 * Messages in PromptL's format (what the gateway client sends and reads) and their translations: to
 * AI SDK model messages for the provider call, and to OpenTelemetry GenAI messages for traces.
 */
export interface PromptlContent {
  type: string;
  text?: string;
  image?: unknown;
  file?: unknown;
  mimeType?: string;
  toolCallId?: string;
  toolName?: string;
  toolArguments?: Record<string, unknown>;
  result?: unknown;
  isError?: boolean;
  [key: string]: unknown;
}

export interface PromptlMessage {
  role: "system" | "developer" | "user" | "assistant" | "tool";
  content: PromptlContent[];
  toolCalls?: ToolCall[];
  toolId?: string;
  toolName?: string;
  [key: string]: unknown;
}

export interface ToolCall {
  id: string;
  name: string;
  arguments: Record<string, unknown>;
}

const roles = new Set(["system", "developer", "user", "assistant", "tool"]);

/** A client's messages, checked and with string content turned into parts; throws a message on bad input. */
export function normalizeMessages(input: unknown, field = "messages"): PromptlMessage[] {
  if (input === undefined || input === null) return [];
  if (!Array.isArray(input)) throw new Error(`${field}: must be an array of messages`);
  return input.map((message, index) => {
    const where = `${field}[${index}]`;
    if (typeof message !== "object" || message === null) throw new Error(`${where}: must be a message object`);
    const { role, content } = message as { role?: unknown; content?: unknown };
    if (typeof role !== "string" || !roles.has(role)) throw new Error(`${where}.role: must be one of system, user, assistant, tool`);
    const parts = typeof content === "string" ? [{ type: "text", text: content }] : content;
    if (!Array.isArray(parts) || parts.some((part) => typeof part !== "object" || part === null || typeof (part as PromptlContent).type !== "string")) {
      throw new Error(`${where}.content: must be a string or an array of typed parts`);
    }
    return { ...(message as object), role, content: parts } as PromptlMessage;
  });
}

export const textOf = (message: PromptlMessage) =>
  message.content
    .filter((part) => part.type === "text")
    .map((part) => part.text ?? "")
    .join("");

/** The assistant message of one provider response. */
export function assistantMessage(text: string, toolCalls: ToolCall[]): PromptlMessage {
  return {
    role: "assistant",
    content: [
      ...(text ? [{ type: "text", text }] : []),
      ...toolCalls.map((call) => ({ type: "tool-call", toolCallId: call.id, toolName: call.name, toolArguments: call.arguments })),
    ],
    toolCalls,
  };
}

export function toolMessage(call: ToolCall, result: unknown, isError: boolean): PromptlMessage {
  return {
    role: "tool",
    toolId: call.id,
    toolName: call.name,
    content: [{ type: "tool-result", toolCallId: call.id, toolName: call.name, result, isError }],
  };
}

/** Tool calls of a message: its tool-call parts, else its `toolCalls`. */
function toolCallsOf(message: PromptlMessage): ToolCall[] {
  const parts = message.content.filter((part) => part.type === "tool-call");
  if (parts.length) return parts.map((part) => ({ id: String(part.toolCallId ?? ""), name: String(part.toolName ?? ""), arguments: part.toolArguments ?? {} }));
  return message.toolCalls ?? [];
}

const toolOutput = (result: unknown, isError: boolean) =>
  isError
    ? { type: "error-text" as const, value: typeof result === "string" ? result : JSON.stringify(result ?? null) }
    : typeof result === "string"
      ? { type: "text" as const, value: result }
      : { type: "json" as const, value: (result ?? null) as never };

/** PromptL messages → AI SDK model messages. */
export function toModelMessages(messages: PromptlMessage[]): ModelMessage[] {
  return messages.map((message): ModelMessage => {
    switch (message.role) {
      case "system":
      case "developer":
        return { role: "system", content: textOf(message) };
      case "assistant":
        return {
          role: "assistant",
          content: [
            ...message.content.filter((part) => part.type === "text").map((part) => ({ type: "text" as const, text: part.text ?? "" })),
            ...toolCallsOf(message).map((call) => ({ type: "tool-call" as const, toolCallId: call.id, toolName: call.name, input: call.arguments })),
          ],
        };
      case "tool":
        return {
          role: "tool",
          content: message.content
            .filter((part) => part.type === "tool-result" || part.type === "text")
            .map((part) => ({
              type: "tool-result" as const,
              toolCallId: String(part.toolCallId ?? message.toolId ?? ""),
              toolName: String(part.toolName ?? message.toolName ?? ""),
              output: toolOutput(part.type === "text" ? part.text : part.result, part.isError === true),
            })),
        };
      default:
        return {
          role: "user",
          content: message.content.map((part) => {
            if (part.type === "image") return { type: "image" as const, image: part.image as string };
            if (part.type === "file") return { type: "file" as const, data: part.file as string, mediaType: part.mimeType ?? "application/octet-stream" };
            return { type: "text" as const, text: part.text ?? "" };
          }),
        };
    }
  });
}

/** PromptL messages → OpenTelemetry GenAI messages (`gen_ai.input.messages` / `gen_ai.output.messages`). */
export function toGenAiMessages(messages: PromptlMessage[]) {
  return messages.map((message) => ({
    role: message.role === "developer" ? "system" : message.role,
    parts: [
      ...message.content.flatMap((part): Record<string, unknown>[] => {
        if (part.type === "text") return [{ type: "text", content: part.text ?? "" }];
        if (part.type === "tool-result") return [{ type: "tool_call_response", id: part.toolCallId ?? message.toolId, response: part.result }];
        if (part.type === "image" || part.type === "file") return [{ type: "uri", modality: part.type === "image" ? "image" : "file", uri: String(part.image ?? part.file ?? "") }];
        return [];
      }),
      ...(message.role === "assistant" ? toolCallsOf(message).map((call) => ({ type: "tool_call", id: call.id, name: call.name, arguments: call.arguments })) : []),
    ],
  }));
}
