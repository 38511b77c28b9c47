import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { JsonTraceSerializer, ProtobufTraceSerializer } from "@opentelemetry/otlp-transformer";

const question = "Summarize the quarterly revenue figures for the EMEA region and flag any anomalies. ";
const answer = "EMEA revenue grew 12% quarter over quarter, driven by the enterprise segment; one anomaly stands out. ";

/** A GenAI chat span of about 4 KB, as the OpenTelemetry SDK records it. */
function recordChatSpans(count: number): ReadableSpan[] {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ "service.name": "bench-agent", "service.version": "1.0.0", "telemetry.sdk.language": "nodejs" }),
    spanProcessors: [new SimpleSpanProcessor(exporter)],
  });
  const tracer = provider.getTracer("bench.instrumentation", "1.0.0");
  for (let i = 0; i < count; i++) {
    const span = tracer.startSpan("chat gpt-4o", {
      attributes: {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.response.model": "gpt-4o-2024-08-06",
        "gen_ai.response.id": `chatcmpl-${i}`,
        "gen_ai.response.finish_reasons": ["stop"],
        "gen_ai.usage.input_tokens": 1200 + i,
        "gen_ai.usage.output_tokens": 300,
        "gen_ai.usage.cache_read.input_tokens": 200,
        "gen_ai.request.temperature": 0.7,
        "session.id": `session-${i % 10}`,
        "user.id": "user-42",
        "latitude.tags": JSON.stringify(["bench", "chat"]),
        "latitude.metadata": JSON.stringify({ environment: "bench", release: "2026.11" }),
        "gen_ai.system_instructions": JSON.stringify([{ type: "text", content: "You are a careful financial analyst." }]),
        "gen_ai.input.messages": JSON.stringify([{ role: "user", parts: [{ type: "text", content: question.repeat(20) }] }]),
        "gen_ai.output.messages": JSON.stringify([{ role: "assistant", parts: [{ type: "text", content: answer.repeat(15) }], finish_reason: "stop" }]),
      },
    });
    span.addEvent("gen_ai.content.completion", { "gen_ai.event.index": 0 });
    span.end();
  }
  return exporter.getFinishedSpans();
}

export function benchRequests(requests: number, spansPerRequest: number) {
  const spans = recordChatSpans(spansPerRequest);
  const protobuf = ProtobufTraceSerializer.serializeRequest(spans)!;
  const json = new TextDecoder().decode(JsonTraceSerializer.serializeRequest(spans)!);
  return { protobuf: Array.from({ length: requests }, () => protobuf), json: Array.from({ length: requests }, () => json), spansPerRequest };
}
