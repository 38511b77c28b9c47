import type { ClickHouseStore } from "../../db/clickhouse";

/** A span's message columns, as `spans` and `span_contents` store them (JSON lists, "" when empty). */
export interface MessageColumns {
  system_instructions: string;
  input_messages: string;
  output_messages: string;
}

/** What log records sent for a span add to it: its messages, and the finish reasons of `gen_ai.choice` events. */
export interface LogContents extends MessageColumns {
  finish_reasons: string[];
}

const SIDES = ["system_instructions", "input_messages", "output_messages"] as const;

/**
 * The messages sent for one span as OTLP log records (src/ingest/logs.ts), each side concatenated in record
 * order; null when none were sent.
 */
export async function logContents(
  ch: Pick<ClickHouseStore, "read" | "database">,
  organizationId: string,
  projectId: string,
  traceId: string,
  spanId: string,
): Promise<LogContents | null> {
  const rows = await ch.read<LogContents>(
    organizationId,
    `SELECT system_instructions, input_messages, output_messages, finish_reasons FROM ${ch.database}.span_contents FINAL
      WHERE organization_id = {organizationId:String} AND project_id = {projectId:String} AND trace_id = {traceId:String} AND span_id = {spanId:String}
      ORDER BY record_time, record_index`,
    { organizationId, projectId, traceId, spanId },
  );
  return mergeLogContents(rows);
}

/** The log records of one span, in record order, as one: each side's messages concatenated; null when there are none. */
export function mergeLogContents(rows: LogContents[]): LogContents | null {
  if (rows.length === 0) return null;
  const merged: LogContents = { system_instructions: "", input_messages: "", output_messages: "", finish_reasons: [...new Set(rows.flatMap((row) => row.finish_reasons))] };
  for (const side of SIDES) {
    const items = rows.flatMap((row) => (row[side] ? (JSON.parse(row[side]) as unknown[]) : []));
    if (items.length > 0) merged[side] = JSON.stringify(items);
  }
  return merged;
}

/** Whether log records may add to the span's messages: `withLogContents` fills only the sides it lacks. */
export const lacksMessages = (span: MessageColumns) => SIDES.some((side) => !span[side]);

/** The span's messages (and finish reasons, when it has the column) with those sent as log records: what the span carries itself wins. */
export function withLogContents<T extends MessageColumns & { finish_reasons?: string[] }>(span: T, contents: LogContents | null): T {
  if (!contents) return span;
  const merged = { ...span };
  for (const side of SIDES) if (!merged[side]) merged[side] = contents[side];
  if (merged.finish_reasons?.length === 0) merged.finish_reasons = contents.finish_reasons;
  return merged;
}
