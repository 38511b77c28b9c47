// OTLP logs: the official OpenTelemetry GenAI instrumentations, in their default content mode, send a call's
// messages as log records (events) linked to the span by its ids. Here the OpenTelemetry logs SDK emits those events
// as the instrumentations do, through the real OTLP log exporters (HTTP protobuf, HTTP JSON with gzip, gRPC), and the
// span comes through the real trace exporter, before or after its events.
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { Metadata } from "@grpc/grpc-js";
import type { LatitudeClient } from "@latitude-data/sdk";
import { context, trace, type Span } from "@opentelemetry/api";
import type { AnyValueMap, LogAttributes } from "@opentelemetry/api-logs";
import { OTLPLogExporter as GrpcLogExporter } from "@opentelemetry/exporter-logs-otlp-grpc";
import { OTLPLogExporter as JsonLogExporter } from "@opentelemetry/exporter-logs-otlp-http";
import { OTLPLogExporter as ProtoLogExporter } from "@opentelemetry/exporter-logs-otlp-proto";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BatchLogRecordProcessor, LoggerProvider, type LogRecordExporter } from "@opentelemetry/sdk-logs";
import { BasicTracerProvider, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import type { Vigil } from "../src/server";
import { bootstrapAccount, startTestVigil } from "./helpers";
import { freePort } from "./process";

setDefaultTimeout(60_000);

let vigil: Vigil;
let grpcPort: number;

beforeAll(async () => {
  grpcPort = await freePort();
  vigil = await startTestVigil({ OTLP_GRPC_PORT: String(grpcPort) });
}, 120_000);

// Stopping waits for the stores: under load it takes longer than a hook's default 5 s.
afterAll(async () => {
  await vigil?.stop();
}, 60_000);

interface Account {
  client: LatitudeClient;
  slug: string;
  apiKey: string;
}

async function newAccount(label: string): Promise<Account> {
  const { account, client } = await bootstrapAccount(vigil.url, { projectName: `Logs ${label} ${Math.random().toString(36).slice(2, 8)}` });
  return { client, slug: account.projectSlug, apiKey: account.apiKey };
}

const headers = (account: Account) => ({ Authorization: `Bearer ${account.apiKey}`, "X-Latitude-Project": account.slug });

type Transport = "proto" | "json+gzip" | "grpc";

function logExporter(account: Account, transport: Transport): LogRecordExporter {
  if (transport === "proto") return new ProtoLogExporter({ url: `${vigil.url}/v1/logs`, headers: headers(account) });
  if (transport === "json+gzip") return new JsonLogExporter({ url: `${vigil.url}/v1/logs`, headers: headers(account), compression: "gzip" as never });
  const metadata = new Metadata();
  metadata.set("authorization", `Bearer ${account.apiKey}`);
  metadata.set("x-latitude-project", account.slug);
  return new GrpcLogExporter({ url: `http://127.0.0.1:${grpcPort}`, metadata });
}

/** A chat span as the official instrumentations record it in event mode: tokens on the span, no messages. */
function chatSpan(account: Account, finishReasons: string[] = ["stop"]) {
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ "service.name": "genai-events-app" }),
    spanProcessors: [new SimpleSpanProcessor(new OTLPTraceExporter({ url: `${vigil.url}/v1/traces`, headers: headers(account) }))],
  });
  const span = provider.getTracer("opentelemetry.instrumentation.openai_v2").startSpan("chat gpt-4o-mini", {
    attributes: {
      "gen_ai.operation.name": "chat",
      "gen_ai.provider.name": "openai",
      "gen_ai.request.model": "gpt-4o-mini",
      "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
      "gen_ai.response.finish_reasons": finishReasons,
      "gen_ai.usage.input_tokens": 50,
      "gen_ai.usage.output_tokens": 12,
    },
  });
  return { span, send: async () => (span.end(), await provider.forceFlush()) };
}

async function emit(account: Account, transport: Transport, span: Span, events: { eventName: string; timestamp?: number; body?: AnyValueMap; attributes?: LogAttributes }[]) {
  const provider = new LoggerProvider({
    resource: resourceFromAttributes({ "service.name": "genai-events-app" }),
    // One export per flush, as the batching processor instrumented apps use sends them.
    processors: [new BatchLogRecordProcessor({ exporter: logExporter(account, transport) })],
  });
  const logger = provider.getLogger("opentelemetry.instrumentation.openai_v2");
  const spanContext = trace.setSpan(context.active(), span);
  for (const event of events) logger.emit({ ...event, context: spanContext });
  await provider.forceFlush();
  await provider.shutdown();
}

const SYSTEM = "You are a travel agent.";
const QUESTION = "Find me a quiet hotel in Lisbon";
const ANSWER = "Casa Alfama is quiet and central.";
const text = (content: string) => ({ type: "text", content });

/** `gen_ai.client.inference.operation.details` (semantic conventions ≥1.37): structured messages as attributes. */
const operationDetails = {
  eventName: "gen_ai.client.inference.operation.details",
  attributes: {
    "gen_ai.operation.name": "chat",
    "gen_ai.system_instructions": [text(SYSTEM)],
    "gen_ai.input.messages": [{ role: "user", parts: [text(QUESTION)] }],
    "gen_ai.output.messages": [{ role: "assistant", parts: [text(ANSWER)], finish_reason: "stop" }],
  } as unknown as LogAttributes,
};

/** The older per-message events (opentelemetry-instrumentation-openai-v2 before the details event): content in the body. */
const messageEvents = [
  { eventName: "gen_ai.system.message", body: { content: SYSTEM }, attributes: { "gen_ai.system": "openai" } },
  { eventName: "gen_ai.user.message", body: { content: QUESTION }, attributes: { "gen_ai.system": "openai" } },
  {
    eventName: "gen_ai.assistant.message",
    body: { tool_calls: [{ id: "call_1", type: "function", function: { name: "search_hotels", arguments: '{"city":"Lisbon"}' } }] },
    attributes: { "gen_ai.system": "openai" },
  },
  { eventName: "gen_ai.tool.message", body: { id: "call_1", content: '{"hotels":["Casa Alfama"]}' }, attributes: { "gen_ai.system": "openai" } },
  { eventName: "gen_ai.choice", body: { index: 0, finish_reason: "stop", message: { role: "assistant", content: ANSWER } }, attributes: { "gen_ai.system": "openai" } },
];

async function readBack(account: Account, span: Span) {
  await vigil.ctx.spanWriter.flush();
  const { traceId, spanId } = span.spanContext();
  return {
    span: await account.client.traces.getSpan(account.slug, traceId, spanId),
    trace: await account.client.traces.get(account.slug, traceId),
  };
}

describe("GenAI events sent as OTLP log records", () => {
  for (const transport of ["proto", "json+gzip", "grpc"] as Transport[]) {
    test(`${transport}: the details event arriving before its span becomes the span's messages`, async () => {
      const account = await newAccount(`before-${transport}`);
      const chat = chatSpan(account);
      await emit(account, transport, chat.span, [operationDetails]);
      await chat.send();
      const { span, trace } = await readBack(account, chat.span);
      expect(span).toMatchObject({
        operation: "chat",
        provider: "openai",
        tokensInput: 50,
        tokensOutput: 12,
        systemInstructions: [text(SYSTEM)],
        inputMessages: [{ role: "user", parts: [text(QUESTION)] }],
        outputMessages: [{ role: "assistant", parts: [text(ANSWER)], finish_reason: "stop" }],
      });
      expect(trace.conversation).toEqual([
        { role: "system", parts: [text(SYSTEM)] },
        { role: "user", parts: [text(QUESTION)] },
        { role: "assistant", parts: [text(ANSWER)], finish_reason: "stop" },
      ]);
    });
  }

  test("older per-message events arriving after their span: messages in order, the system message as instructions, tool parts", async () => {
    const account = await newAccount("after");
    const chat = chatSpan(account, []);
    await chat.send();
    await vigil.ctx.spanWriter.flush();
    await emit(account, "proto", chat.span, messageEvents);
    const { span } = await readBack(account, chat.span);
    expect(span.systemInstructions).toEqual([text(SYSTEM)]);
    expect(span.inputMessages).toEqual([
      { role: "user", parts: [text(QUESTION)] },
      { role: "assistant", parts: [{ type: "tool_call", id: "call_1", name: "search_hotels", arguments: { city: "Lisbon" } }] },
      { role: "tool", parts: [{ type: "tool_call_response", id: "call_1", response: { hotels: ["Casa Alfama"] } }] },
    ]);
    expect(span.outputMessages).toEqual([{ role: "assistant", parts: [text(ANSWER)], finish_reason: "stop" }]);
    // The span named none itself: the choice event's finish reason is the span's.
    expect(span.finishReasons).toEqual(["stop"]);
  });

  test("the events' text is searchable, a retried export is stored once, and redaction applies", async () => {
    const account = await newAccount("search");
    await account.client.projects.update(account.slug, { settings: { redaction: { mode: "enforce" } } });
    const chat = chatSpan(account);
    await chat.send();
    // The same record sent twice, as an exporter retrying after a lost answer would.
    const withEmail = { eventName: "gen_ai.user.message", timestamp: Date.now(), body: { content: "Mail the booking to ana@example.com please, Zanzibar" } };
    await emit(account, "proto", chat.span, [withEmail]);
    await emit(account, "proto", chat.span, [withEmail]);
    const { span } = await readBack(account, chat.span);
    expect(span.inputMessages).toEqual([{ role: "user", parts: [text("Mail the booking to [REDACTED_EMAIL] please, Zanzibar")] }]);
    const found = await account.client.traces.list(account.slug, { query: "zanzibar" });
    expect(found.items.map((item) => item.traceId)).toEqual([chat.span.spanContext().traceId]);
  });

  test("other log records are left out with a partial-success count; credentials are checked as for traces", async () => {
    const account = await newAccount("other");
    const chat = chatSpan(account);
    const traceId = chat.span.spanContext().traceId;
    const spanId = chat.span.spanContext().spanId;
    const now = BigInt(Date.now()) * 1_000_000n;
    const at = (offset: bigint) => String(now + offset);
    const body = {
      resourceLogs: [
        {
          resource: { attributes: [{ key: "service.name", value: { stringValue: "app" } }] },
          scopeLogs: [
            {
              logRecords: [
                { timeUnixNano: at(0n), body: { stringValue: "cache warmed" }, severityText: "INFO" },
                { timeUnixNano: at(1n), eventName: "gen_ai.user.message", traceId, spanId, body: { kvlistValue: { values: [{ key: "content", value: { stringValue: QUESTION } }] } } },
                { timeUnixNano: at(2n), eventName: "gen_ai.user.message", body: { kvlistValue: { values: [{ key: "content", value: { stringValue: "no span" } }] } } },
              ],
            },
          ],
        },
      ],
    };
    const post = (auth: Record<string, string>) =>
      fetch(`${vigil.url}/v1/logs`, { method: "POST", headers: { "content-type": "application/json", ...auth }, body: JSON.stringify(body) });
    const answer = await post(headers(account));
    expect(answer.status).toBe(200);
    expect(await answer.json()).toEqual({
      partialSuccess: { rejectedLogRecords: 2, errorMessage: expect.stringContaining("1 log record is not a GenAI message event: not stored") },
    });
    const unauthenticated = await post({ "X-Latitude-Project": account.slug });
    expect(unauthenticated.status).toBe(401);
    expect(await unauthenticated.json()).toEqual({ error: expect.any(String) });
    const garbage = await fetch(`${vigil.url}/v1/logs`, { method: "POST", headers: { "content-type": "application/x-protobuf", ...headers(account) }, body: new Uint8Array([0x0a, 0xff]) });
    expect(garbage.status).toBe(400);
    await chat.send();
    const { span } = await readBack(account, chat.span);
    expect(span.inputMessages).toEqual([{ role: "user", parts: [text(QUESTION)] }]);
  });
});

describe("limits and backpressure shared with spans", () => {
  test("an oversize logs body is a 413; while a span export holds the only slot, a logs export is a 503 with Retry-After", async () => {
    const limited = await startTestVigil({ INGEST_MAX_CONCURRENT_EXPORTS: "1", INGEST_MAX_BODY_BYTES: "65536" });
    try {
      const { account } = await bootstrapAccount(limited.url, { projectName: "Logs limits" });
      const auth = { Authorization: `Bearer ${account.apiKey}`, "X-Latitude-Project": account.projectSlug, "content-type": "application/json" };
      const logs = (content: string) =>
        JSON.stringify({ resourceLogs: [{ scopeLogs: [{ logRecords: [{ eventName: "gen_ai.user.message", body: { kvlistValue: { values: [{ key: "content", value: { stringValue: content } }] } } }] }] }] });
      const oversize = await fetch(`${limited.url}/v1/logs`, { method: "POST", headers: auth, body: logs("x".repeat(100_000)) });
      expect(oversize.status).toBe(413);
      expect(await oversize.json()).toEqual({ error: "Request body exceeds the limit of 65536 bytes" });

      const spans = new TextEncoder().encode(JSON.stringify({ resourceSpans: [] }));
      let finish!: () => void;
      const rest = new Promise<void>((resolve) => (finish = resolve));
      const slow = new ReadableStream<Uint8Array>({
        async start(controller) {
          controller.enqueue(spans.slice(0, 5));
          await rest;
          controller.enqueue(spans.slice(5));
          controller.close();
        },
      });
      const holding = fetch(`${limited.url}/v1/traces`, { method: "POST", headers: auth, body: slow });
      await Bun.sleep(200);
      const refused = await fetch(`${limited.url}/v1/logs`, { method: "POST", headers: auth, body: logs("hello") });
      expect(refused.status).toBe(503);
      expect(refused.headers.get("retry-after")).toBe("1");
      finish();
      expect((await holding).status).toBe(200);
    } finally {
      await limited.stop();
    }
  });
});
