import type { SpanRow } from "../src/ingest/row";

/**
 * A deterministic corpus of GenAI span content for the redaction benchmark and tests: JSON message
 * arrays of about 4 KB with prose, code, tool calls (arguments as JSON inside JSON), timestamps, ids,
 * versions and numbers, and PII in some spans.
 */

function prng(seed: number) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WORDS = (
  "the order was shipped yesterday and should arrive within three business days please let me know if you " +
  "need anything else I checked the account settings and the subscription renews on the first of each month " +
  "our records show two invoices for this period the second one was refunded automatically you can update " +
  "the payment method from the billing page we also noticed that the export job failed because the dataset " +
  "was larger than the limit try splitting it into smaller batches or enable streaming mode"
).split(" ");

const PII = [
  "jane.doe@example.com",
  "+1 (415) 555-0132",
  "415-555-0199",
  "+44 20 7946 0958",
  "4111 1111 1111 1111",
  "5500-0000-0000-0004",
  "DE89 3704 0044 0532 0130 00",
  "GB82WEST12345698765432",
  "123-45-6789",
  "sk-proj-Xk2Lm9Qw3Rt7Yp1Zs8Vb4Nc6Hd0Fg5Jk",
  "AKIAIOSFODNN7EXAMPLE",
  "ghp_aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5",
  "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
  "10.20.30.40",
];

export interface CorpusSpan {
  systemInstructions: string;
  inputMessages: string;
  outputMessages: string;
}

/** `count` spans; about one in `piiEvery` messages carries one or two PII values. */
export function generateCorpus(count: number, seed = 42, piiEvery = 3): CorpusSpan[] {
  const random = prng(seed);
  const pick = <T>(items: T[]) => items[Math.floor(random() * items.length)];
  const hex = (length: number) => Array.from({ length }, () => "0123456789abcdef"[Math.floor(random() * 16)]).join("");
  const sentence = (words: number) => {
    const text = Array.from({ length: words }, () => pick(WORDS)).join(" ");
    return text[0].toUpperCase() + text.slice(1) + ".";
  };
  const prose = (sentences: number) => {
    const parts: string[] = [];
    for (let i = 0; i < sentences; i++) {
      parts.push(sentence(8 + Math.floor(random() * 12)));
      if (random() < 0.25) parts.push(`Reference ORD-2024-${100000 + Math.floor(random() * 900000)} at 2024-06-${10 + Math.floor(random() * 18)}T12:${10 + Math.floor(random() * 49)}:05Z.`);
      if (random() < 0.15) parts.push(`Upgraded to v${Math.floor(random() * 9)}.${Math.floor(random() * 20)}.${Math.floor(random() * 30)}, latency ${Math.floor(random() * 900)} ms, total $${(random() * 1000).toFixed(2)}.`);
    }
    if (random() < 0.1) parts.push("Thanks — that’s great 👍");
    if (random() < 1 / piiEvery) parts.splice(Math.floor(random() * parts.length), 0, `Contact: ${pick(PII)}.`);
    if (random() < 1 / (piiEvery * 2)) parts.push(`Also ${pick(PII)}`);
    return parts.join(random() < 0.5 ? " " : "\n");
  };
  const spans: CorpusSpan[] = [];
  for (let i = 0; i < count; i++) {
    const callId = `call_${hex(24)}`;
    const args = JSON.stringify({ order_id: `ORD-${Math.floor(random() * 1e6)}`, include_history: true, note: prose(1) });
    const result = JSON.stringify({
      status: "ok",
      trace_id: hex(32),
      span_id: hex(16),
      request_id: `${hex(8)}-${hex(4)}-${hex(4)}-${hex(4)}-${hex(12)}`,
      created_at: 1718000000000 + Math.floor(random() * 1e9),
      created_at_ns: `17180000000${Math.floor(random() * 1e8)}00`,
      amount_cents: Math.floor(random() * 1e6),
      items: [{ sku: `SKU-${Math.floor(random() * 1e5)}`, quantity: 2, price: 19.99 }],
      summary: prose(3),
    });
    spans.push({
      systemInstructions: JSON.stringify([{ type: "text", content: `You are a support assistant for Acme. Today is 2024-06-18. ${prose(2)}` }]),
      inputMessages: JSON.stringify([
        { role: "user", parts: [{ type: "text", content: prose(8) }] },
        { role: "assistant", parts: [{ type: "tool_call", id: callId, name: "lookup_order", arguments: args }] },
        { role: "tool", parts: [{ type: "tool_call_response", id: callId, response: result }] },
      ]),
      outputMessages: JSON.stringify([
        {
          role: "assistant",
          parts: [{ type: "text", content: `${prose(10)}\n\n\`\`\`ts\nconst total = items.reduce((sum, item) => sum + item.price * item.quantity, 0);\n\`\`\`\n${prose(3)}` }],
          finish_reason: "stop",
        },
      ]),
    });
  }
  return spans;
}

/** A complete row with empty values, for the benchmark and tests of the redact stage. */
export function blankSpanRow(fields: Partial<SpanRow> = {}): SpanRow {
  return {
    organization_id: "",
    project_id: "",
    trace_id: "",
    span_id: "",
    parent_span_id: "",
    name: "",
    kind: "internal",
    status_code: "unset",
    status_message: "",
    trace_state: "",
    trace_flags: 0,
    scope_name: "",
    scope_version: "",
    service_name: "",
    start_time: "0",
    end_time: "0",
    duration_ns: 0,
    api_key_id: "",
    operation: "",
    provider: "",
    model: "",
    response_model: "",
    response_id: "",
    finish_reasons: [],
    error_type: "",
    session_id: "",
    user_id: "",
    simulation_id: "",
    tags: [],
    metadata: {},
    tokens_input: 0,
    tokens_output: 0,
    tokens_cache_read: 0,
    tokens_cache_create: 0,
    tokens_reasoning: 0,
    cost_input_microcents: 0,
    cost_output_microcents: 0,
    cost_total_microcents: 0,
    cost_is_estimated: false,
    time_to_first_token_ns: 0,
    is_streaming: false,
    is_usage_wrapper: false,
    tool_call_id: "",
    tool_name: "",
    tool_input: "",
    tool_output: "",
    defined_tools: [],
    tool_definitions: "",
    system_instructions: "",
    input_messages: "",
    output_messages: "",
    message_text: "",
    memory_store_id: "",
    memory_record_id: "",
    attr_string: {},
    attr_int: {},
    attr_float: {},
    attr_bool: {},
    resource_string: {},
    events_json: "",
    links_json: "",
    retention_days: 0,
    ...fields,
  };
}
