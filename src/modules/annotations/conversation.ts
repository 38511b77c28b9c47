import type { ClickHouseStore } from "../../db/clickhouse";

type Message = Record<string, unknown>;

const parseArray = (json: string): unknown[] => (json ? (JSON.parse(json) as unknown[]) : []);

/**
 * TraceDetail.conversation: system instructions, then the input and the output messages of the
 * trace's last LLM-completion span.
 */
export async function loadConversation(ch: ClickHouseStore, organizationId: string, projectId: string, traceId: string): Promise<Message[]> {
  const result = await ch.client.query({
    query: `
      SELECT system_instructions, input_messages, output_messages
      FROM ${ch.database}.spans
      WHERE organization_id = {organizationId:String} AND project_id = {projectId:String} AND trace_id = {traceId:String}
        AND operation IN ('chat', 'text_completion', 'generate_content') AND NOT is_usage_wrapper
      ORDER BY end_time DESC
      LIMIT 1`,
    query_params: { organizationId, projectId, traceId },
    format: "JSONEachRow",
  });
  const [span] = await result.json<{ system_instructions: string; input_messages: string; output_messages: string }>();
  if (!span) return [];
  const system = parseArray(span.system_instructions);
  return [
    ...(system.length > 0 ? [{ role: "system", parts: system }] : []),
    ...(parseArray(span.input_messages) as Message[]),
    ...(parseArray(span.output_messages) as Message[]),
  ];
}
