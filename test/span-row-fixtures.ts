import type { SpanRow } from "../src/ingest/row";

const hex = (value: number, width: number) => value.toString(16).padStart(width, "0");
/** An hour ago: recent enough that the tables' retention TTL keeps the rows. */
const baseTimeNs = BigInt(Date.now() - 3_600_000) * 1_000_000n;
const prose =
  "Observability for agents means seeing every model call, tool call and retry with its tokens, cost and latency. ";

/** A GenAI chat span as the mapper produces it, about `approxBytes` large (messages dominate). */
export function chatSpanRow(index: number, overrides: Partial<SpanRow> = {}, approxBytes = 4096): SpanRow {
  const traceIndex = Math.floor(index / 5);
  const start = baseTimeNs + BigInt(index) * 1_000_003n;
  const duration = 850_000_000 + (index % 97) * 1_000_000;
  const question = prose.repeat(Math.max(1, Math.round((approxBytes * 0.55) / prose.length)));
  const answer = prose.repeat(Math.max(1, Math.round((approxBytes * 0.25) / prose.length)));
  const inputMessages = JSON.stringify([{ role: "user", parts: [{ type: "text", content: `#${index} ${question}` }] }]);
  const outputMessages = JSON.stringify([{ role: "assistant", parts: [{ type: "text", content: answer }], finish_reason: "stop" }]);
  return {
    organization_id: "org_fixture_000000000000",
    project_id: "prj_fixture_000000000000",
    trace_id: hex(traceIndex, 32),
    span_id: hex(index + 1, 16),
    parent_span_id: index % 5 === 0 ? "" : hex(traceIndex * 5 + 1, 16),
    name: "chat gpt-4.1",
    kind: "client",
    status_code: index % 50 === 0 ? "error" : "ok",
    status_message: "",
    trace_state: "",
    trace_flags: 1,
    scope_name: "@latitude-data/telemetry",
    scope_version: "3.6.0",
    service_name: "support-agent",
    start_time: start.toString(),
    end_time: (start + BigInt(duration)).toString(),
    duration_ns: duration,
    api_key_id: "key_fixture",
    operation: "chat",
    provider: "openai",
    model: "gpt-4.1",
    response_model: "gpt-4.1-2025-04-14",
    response_id: `chatcmpl-${index}`,
    finish_reasons: ["stop"],
    error_type: "",
    session_id: `session-${traceIndex % 100}`,
    user_id: `user-${traceIndex % 37}`,
    simulation_id: "",
    tags: ["production", "ünïcode-tag"],
    metadata: { tenant: "acme", release: "2026.11" },
    tokens_input: 100 + (index % 11),
    tokens_output: 40 + (index % 7),
    tokens_cache_read: index % 3,
    tokens_cache_create: 0,
    tokens_reasoning: index % 2,
    cost_input_microcents: 200 + index,
    cost_output_microcents: 320,
    cost_total_microcents: 520 + index,
    cost_is_estimated: true,
    time_to_first_token_ns: 120_000_000 + index,
    is_streaming: index % 2 === 0,
    is_usage_wrapper: false,
    tool_call_id: "",
    tool_name: "",
    tool_input: "",
    tool_output: "",
    defined_tools: ["search_docs"],
    tool_definitions: '[{"name":"search_docs","description":"Search the docs","parameters":{"type":"object"}}]',
    system_instructions: '[{"type":"text","content":"You are a helpful support agent."}]',
    input_messages: inputMessages,
    output_messages: outputMessages,
    message_text: `${question} ${answer}`.slice(0, 512),
    memory_store_id: "",
    memory_record_id: "",
    attr_string: { "gen_ai.request.model": "gpt-4.1", "http.route": "/chat" },
    attr_int: { "gen_ai.request.max_tokens": 1024, "retry.count": -2 },
    attr_float: { "gen_ai.request.temperature": 0.7 },
    attr_bool: { "gen_ai.request.stream": index % 2 === 0 },
    resource_string: { "service.name": "support-agent", "telemetry.sdk.language": "nodejs" },
    events_json: "",
    links_json: "",
    retention_days: 30,
    ...overrides,
  };
}
