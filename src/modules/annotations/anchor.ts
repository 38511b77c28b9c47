import { badRequest } from "../../lib/errors";
import type { AnnotationAnchor } from "./model";

/** The anchor rules of SPEC.md §2 that need no trace: pairings and order of offsets. */
export function checkAnchorShape(anchor: AnnotationAnchor): void {
  const { messageIndex, partIndex, startOffset, endOffset } = anchor;
  if (partIndex !== undefined && messageIndex === undefined) throw badRequest("anchor.partIndex: requires anchor.messageIndex");
  if ((startOffset === undefined) !== (endOffset === undefined)) {
    throw badRequest("anchor.startOffset and anchor.endOffset: must be sent together");
  }
  if (startOffset !== undefined && partIndex === undefined) throw badRequest("anchor.startOffset: requires anchor.partIndex");
  if (startOffset !== undefined && endOffset! < startOffset) throw badRequest("anchor.endOffset: must be greater than or equal to anchor.startOffset");
}

type Part = Record<string, unknown>;

/** The part value a UI shows as text: the text itself, a tool call's arguments, a tool result's response. */
function partValue(part: Part): unknown {
  if (typeof part.content === "string") return part.content;
  if (part.type === "tool_call") return part.arguments;
  if (part.type === "tool_call_response") return part.response;
  return part;
}

function partText(part: Part, textFormat: AnnotationAnchor["textFormat"]): string {
  const value = partValue(part);
  if (textFormat !== "pretty-json") return typeof value === "string" ? value : JSON.stringify(value ?? null);
  if (typeof value !== "string") return JSON.stringify(value ?? null, null, 2);
  try {
    return JSON.stringify(JSON.parse(value), null, 2);
  } catch {
    return value;
  }
}

/** 400 unless the message, part and character range the anchor names exist in the trace's conversation. */
export function checkAnchorInConversation(anchor: AnnotationAnchor, conversation: Record<string, unknown>[]): void {
  const { messageIndex, partIndex, endOffset, textFormat } = anchor;
  if (messageIndex === undefined) return;
  const message = conversation[messageIndex];
  if (!message) throw badRequest(`anchor.messageIndex: the trace's conversation has ${conversation.length} messages`);
  if (partIndex === undefined) return;
  const parts = Array.isArray(message.parts) ? (message.parts as Part[]) : [];
  const part = parts[partIndex];
  if (!part) throw badRequest(`anchor.partIndex: message ${messageIndex} has ${parts.length} parts`);
  if (endOffset === undefined) return;
  const length = partText(part, textFormat).length;
  if (endOffset > length) throw badRequest(`anchor.endOffset: part ${partIndex} of message ${messageIndex} is ${length} characters long`);
}
