import type { ClickHouseStore } from "../../db/clickhouse";
import type { GenAiMessage } from "../traces/model";
import { logContents, withLogContents } from "../traces/contents";
import { conversationOf } from "../traces/rows";
import { traceSpansWhere, type ScoredTrace } from "../scores/trace-ref";

/** TraceDetail.conversation of a trace: what annotation anchors index into. */
export async function loadConversation(ch: ClickHouseStore, organizationId: string, projectId: string, trace: ScoredTrace): Promise<GenAiMessage[]> {
  if (!trace.lastLlmSpanId) return [];
  const spans = traceSpansWhere(organizationId, projectId, trace);
  const [[span], contents] = await Promise.all([
    ch.read<{ system_instructions: string; input_messages: string; output_messages: string }>(
      organizationId,
      `SELECT system_instructions, input_messages, output_messages
       FROM ${ch.database}.spans FINAL
       WHERE ${spans.where} AND span_id = {spanId:String}
       LIMIT 1`,
      { ...spans.params, spanId: trace.lastLlmSpanId },
    ),
    logContents(ch, organizationId, projectId, trace.traceId, trace.lastLlmSpanId),
  ]);
  return conversationOf(span ? withLogContents(span, contents) : null);
}
