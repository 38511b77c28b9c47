import { randomBytes } from "node:crypto";
import type { Context } from "../src/context";

export const randomTraceId = () => randomBytes(16).toString("hex");
export const randomSpanId = () => randomBytes(8).toString("hex");

export interface TraceFixture {
  organizationId: string;
  projectId: string;
  traceId?: string;
  sessionId?: string;
  userId?: string;
  tags?: string[];
  /** Messages of the LLM span, GenAI format; the conversation is system + input + output. */
  system?: unknown[];
  input?: unknown[];
  output?: unknown[];
}

const nanos = (ms: number) => `${new Date(ms).toISOString().replace("T", " ").replace("Z", "")}000000`;

/**
 * Writes one trace into ClickHouse `spans` as ingest would: a root agent span and two chat spans,
 * of which the later one is the trace's last LLM-completion span.
 */
export async function insertTrace(ctx: Context, fixture: TraceFixture) {
  const traceId = fixture.traceId ?? randomTraceId();
  const rootSpanId = randomSpanId();
  const firstChatSpanId = randomSpanId();
  const lastChatSpanId = randomSpanId();
  const start = Date.now() - 60_000;
  const span = (spanId: string, parent: string, name: string, operation: string, from: number, to: number) => ({
    organization_id: fixture.organizationId,
    project_id: fixture.projectId,
    trace_id: traceId,
    span_id: spanId,
    parent_span_id: parent,
    name,
    kind: "internal",
    status_code: "ok",
    start_time: nanos(start + from),
    end_time: nanos(start + to),
    duration_ns: (to - from) * 1_000_000,
    operation,
    session_id: fixture.sessionId ?? "",
    user_id: fixture.userId ?? "",
    tags: fixture.tags ?? [],
  });
  const llm = {
    system_instructions: JSON.stringify(fixture.system ?? []),
    input_messages: JSON.stringify(fixture.input ?? [{ role: "user", parts: [{ type: "text", content: "hello" }] }]),
    output_messages: JSON.stringify(fixture.output ?? [{ role: "assistant", parts: [{ type: "text", content: "hi there" }] }]),
  };
  await ctx.ch.client.insert({
    table: `${ctx.ch.database}.spans`,
    values: [
      span(rootSpanId, "", "agent", "invoke_agent", 0, 3000),
      { ...span(firstChatSpanId, rootSpanId, "chat one", "chat", 100, 1000), input_messages: llm.input_messages },
      { ...span(lastChatSpanId, rootSpanId, "chat two", "chat", 1100, 2900), ...llm },
    ],
    format: "JSONEachRow",
  });
  return { traceId, rootSpanId, lastChatSpanId };
}
