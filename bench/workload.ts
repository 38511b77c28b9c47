// The ingest benchmark's workload: realistic GenAI OTLP/protobuf requests of 100 spans, ~4 KB per
// span with messages, some PII, 20% tool spans, 5 spans per trace (agent root, 3 chats, 1 tool).
import { ProtobufTraceSerializer } from "@opentelemetry/otlp-transformer";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { context, trace } from "@opentelemetry/api";

export const SPANS_PER_REQUEST = 100;
export const SPANS_PER_TRACE = 5;

// Text that compresses like real conversations (about 3–4× with ZSTD), not like one sentence repeated:
// words drawn from a few hundred common ones, with numbers and identifiers mixed in.
const vocabulary = (
  "the of and to a in is that for it as was with be by on not he this are or his from at which but have an they you were " +
  "her she there been one all we their has would when if so no will what can more out up about some them into only time could " +
  "other than then now its two may first also new these any such our most after over well where just much how before those " +
  "customer invoice refund order account payment shipping delivery subscription plan upgrade cancel renewal billing charge " +
  "error timeout retry request response latency region cluster database query index cache token model prompt agent tool " +
  "quarterly revenue growth churn segment enterprise support ticket escalation priority severity incident resolved pending " +
  "please thanks sorry confirm verify update check review summary report analysis forecast budget contract vendor policy " +
  "monday tuesday wednesday thursday friday january march june september december morning afternoon evening week month year " +
  "because however therefore although meanwhile instead otherwise finally additionally specifically approximately " +
  "increase decrease compare estimate calculate schedule assign notify approve reject submit transfer migrate deploy rollback"
).split(" ");
const pii = ["Reach me at jane.doe@example.com", "call +1 415 555 0100", "card 4111 1111 1111 1111", "ssn 123-45-6789", "key sk-proj-Ab12Cd34Ef56Gh78Ij90Kl"];

/** Deterministic pseudo-random numbers (mulberry32), so runs send the same bytes. */
function random(seed: number) {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

let draw = random(1);
function prose(length: number) {
  const parts: string[] = [];
  let size = 0;
  for (let i = 0; size < length; i++) {
    const roll = draw();
    const word = roll < 0.06 ? String(Math.floor(draw() * 100_000)) : roll < 0.08 ? `INV-${Math.floor(draw() * 1e6)}` : vocabulary[Math.floor(draw() * vocabulary.length)];
    parts.push(i % 14 === 13 ? `${word}.` : word);
    size += word.length + 1;
  }
  return parts.join(" ");
}

/** One request body: 20 traces of 5 spans (agent root, 3 chats, 1 tool), ~4 KB a span, PII in some messages. */
function templateRequest(seed: number): { body: Uint8Array; traceIds: string[] } {
  draw = random(seed);
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ "service.name": "support-agent", "service.version": "2.3.1", "deployment.environment": "bench" }),
    spanProcessors: [new SimpleSpanProcessor(exporter)],
  });
  const tracer = provider.getTracer("bench.agent", "1.0.0");
  const traceIds: string[] = [];
  for (let t = 0; t < SPANS_PER_REQUEST / SPANS_PER_TRACE; t++) {
    const root = tracer.startSpan("invoke_agent support", {
      attributes: { "gen_ai.operation.name": "invoke_agent", "session.id": `session-${t % 7}`, "user.id": `user-${t}`, "latitude.tags": '["bench"]' },
    });
    traceIds.push(root.spanContext().traceId);
    const parent = trace.setSpan(context.active(), root);
    for (let c = 0; c < SPANS_PER_TRACE - 2; c++) {
      const history = [
        { role: "user", parts: [{ type: "text", content: prose(2000) + ((t + c) % 3 === 0 ? ` ${pii[(t + c) % pii.length]}.` : "") }] },
        { role: "assistant", parts: [{ type: "tool_call", id: `call_${t}_${c}`, name: "lookup_invoice", arguments: { invoice: `INV-${t}${c}` } }] },
        { role: "tool", parts: [{ type: "tool_call_response", id: `call_${t}_${c}`, response: prose(900) }] },
      ];
      const chat = tracer.startSpan(
        "chat gpt-4.1",
        {
          attributes: {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "gpt-4.1",
            "gen_ai.response.model": "gpt-4.1-2025-04-14",
            "gen_ai.usage.input_tokens": 1400 + c,
            "gen_ai.usage.output_tokens": 280,
            "gen_ai.usage.cache_read.input_tokens": 400,
            "gen_ai.system_instructions": JSON.stringify([{ type: "text", content: "You are a careful support agent. " + prose(500) }]),
            "gen_ai.input.messages": JSON.stringify(history),
            "gen_ai.output.messages": JSON.stringify([{ role: "assistant", parts: [{ type: "text", content: prose(1500) }], finish_reason: "stop" }]),
            "gen_ai.server.time_to_first_token": 0.35,
          },
        },
        parent,
      );
      chat.end();
    }
    const tool = tracer.startSpan(
      "execute_tool lookup_invoice",
      {
        attributes: {
          "gen_ai.operation.name": "execute_tool",
          "gen_ai.tool.name": "lookup_invoice",
          "gen_ai.tool.call.id": `call_${t}`,
          "gen_ai.tool.call.arguments": JSON.stringify({ invoice: `INV-${t}` }),
          "gen_ai.tool.call.result": JSON.stringify({ status: "paid", notes: prose(2000) }),
        },
      },
      parent,
    );
    tool.end();
    root.end();
  }
  return { body: ProtobufTraceSerializer.serializeRequest(exporter.getFinishedSpans())!, traceIds };
}

/**
 * Requests from a pool of distinct templates, each sent with fresh trace ids written over the template's
 * bytes, so every request stores new spans and neighbouring rows do not repeat each other's text.
 */
export function requestFactory(templates = 200) {
  const pool = Array.from({ length: templates }, (_, seed) => {
    const { body, traceIds } = templateRequest(seed + 1);
    const buffer = Buffer.from(body);
    const offsets = traceIds.map((hex) => {
      const needle = Buffer.from(hex, "hex");
      const found: number[] = [];
      for (let at = buffer.indexOf(needle); at !== -1; at = buffer.indexOf(needle, at + 1)) found.push(at);
      return found;
    });
    return { buffer, offsets };
  });
  let counter = 0;
  return {
    bytes: pool.reduce((sum, { buffer }) => sum + buffer.byteLength, 0) / pool.length,
    next(): Buffer {
      const { buffer, offsets } = pool[counter % pool.length];
      const copy = Buffer.from(buffer);
      for (const places of offsets) {
        const id = crypto.getRandomValues(new Uint8Array(16));
        new DataView(id.buffer).setUint32(12, counter++);
        for (const at of places) copy.set(id, at);
      }
      return copy;
    },
  };
}
