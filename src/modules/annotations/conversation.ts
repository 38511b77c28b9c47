import type { ClickHouseStore } from "../../db/clickhouse";
import type { GenAiMessage } from "../traces/model";
import { logContents, withLogContents } from "../traces/contents";
import { conversationOf } from "../traces/rows";
import { traceSpansWhere, type ScoredTrace } from "../scores/trace-ref";

/** TraceDetail.conversation of a trace: what annotation anchors index into. */
export async function loadConversation(ch: ClickHouseStore, organizationId: string, projectId: string, trace: ScoredTrace): Promise<GenAiMessage[]> {
  if (!trace.lastLlmSpanId) return [];
  const spans = traceSpansWhere(organizationId, projectId, trace);
  const query = ch.client.query({
    query: `
      SELECT system_instructions, input_messages, output_messages
      FROM ${ch.database}.spans FINAL
      WHERE ${spans.where} AND span_id = {spanId:String}
      LIMIT 1`,
    query_params: { ...spans.params, spanId: trace.lastLlmSpanId },
    format: "JSONEachRow",
  });
  const [result, contents] = await Promise.all([query, logContents(ch, organizationId, projectId, trace.traceId, trace.lastLlmSpanId)]);
  const [span] = await result.json<{ system_instructions: string; input_messages: string; output_messages: string }>();
  return conversationOf(span ? withLogContents(span, contents) : null);
}
