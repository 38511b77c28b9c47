// Real OpenTelemetry exporters and the Latitude telemetry SDK send to a real in-process Vigil; every mapped value is
// read back field by field through the official SDK's read API.
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { Metadata } from "@grpc/grpc-js";
import type { LatitudeClient } from "@latitude-data/sdk";
import { context, SpanKind, SpanStatusCode, trace, type HrTime, type Span } from "@opentelemetry/api";
import { OTLPTraceExporter as GrpcTraceExporter } from "@opentelemetry/exporter-trace-otlp-grpc";
import { OTLPTraceExporter as JsonTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { OTLPTraceExporter as ProtoTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from "@opentelemetry/sdk-trace-base";
import type { Vigil } from "../src/server";
import { bootstrapAccount, startTestVigil } from "./helpers";
import { freePort } from "./process";

setDefaultTimeout(60_000);

/** The exporter's own option type for `compression` (CompressionAlgorithm.GZIP is the string "gzip"). */
type Compression = NonNullable<NonNullable<ConstructorParameters<typeof JsonTraceExporter>[0]>["compression"]>;
const GZIP = "gzip" as Compression;

let vigil: Vigil;
let grpcPort: number;

beforeAll(async () => {
  grpcPort = await freePort();
  vigil = await startTestVigil({ OTLP_GRPC_PORT: String(grpcPort) });
});

afterAll(async () => {
  await vigil?.stop();
});

interface Account {
  client: LatitudeClient;
  slug: string;
  apiKey: string;
  projectId: string;
  organizationId: string;
  apiKeyId: string;
}

async function newAccount(label: string): Promise<Account> {
  const { account, client } = await bootstrapAccount(vigil.url, { projectName: `Ingest ${label} ${Math.random().toString(36).slice(2, 8)}` });
  const project = await client.projects.get(account.projectSlug);
  const keys = (await client.apiKeys.list()).apiKeys;
  expect(keys).toHaveLength(1);
  return { client, slug: account.projectSlug, apiKey: account.apiKey, projectId: project.id, organizationId: project.organizationId, apiKeyId: keys[0].id };
}

// ---- one agent turn, as an instrumented app would record it --------------------------------------

const SYSTEM = [{ type: "text", content: "You are a weather bot." }];
const QUESTION = "What's the weather in Paris?";
const TOOL_DEFINITIONS = [
  {
    type: "function",
    function: { name: "get_weather", description: "Current weather of a city", parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } },
  },
];
const ANSWER = "It is 18°C and sunny in Paris.";

/** `[seconds, nanoseconds]` as the read API prints it: ISO-8601 with all nine fractional digits. */
const isoNanos = ([seconds, nanos]: HrTime) => new Date(seconds * 1000).toISOString().replace(".000Z", `.${String(nanos).padStart(9, "0")}Z`);
/** Exact: epoch nanoseconds are beyond a double's integer range. */
const nanosBetween = (start: HrTime, end: HrTime) => Number(BigInt(end[0]) * 1_000_000_000n + BigInt(end[1]) - (BigInt(start[0]) * 1_000_000_000n + BigInt(start[1])));

interface WeatherTrace {
  traceId: string;
  root: string;
  chat: string;
  tool: string;
  answer: string;
  times: Record<"root" | "chat" | "tool" | "answer", { start: HrTime; end: HrTime }>;
  /** In the order they are sent: one request per group. */
  requests: ReadableSpan[][];
}

/**
 * Records root (agent) → chat (OpenAI, asks for a tool) → tool → answer (Anthropic) with the real SDK. Times are
 * a couple of minutes ago with distinct nanoseconds, so exact 64-bit times can be checked.
 */
function recordWeatherTrace(label: string, resource: Record<string, string>, spanAttributes: Record<string, string> = {}): WeatherTrace {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ "service.name": "weather-service", "deployment.environment": "test", ...resource }),
    spanProcessors: [new SimpleSpanProcessor(exporter)],
  });
  const tracer = provider.getTracer("vigil-ingest-test", "1.2.3");
  const base = Math.floor(Date.now() / 1000) - 120;
  const times = {
    root: { start: [base, 100_000_001], end: [base + 3, 900_000_000] },
    chat: { start: [base, 200_000_002], end: [base + 1, 3] },
    tool: { start: [base + 1, 100_000_000], end: [base + 1, 350_000_000] },
    answer: { start: [base + 1, 400_000_000], end: [base + 2, 800_000_123] },
  } satisfies WeatherTrace["times"];
  const identity = { "session.id": `session-${label}`, "user.id": `user-${label}`, ...spanAttributes };

  const root = tracer.startSpan("weather-agent", {
    kind: SpanKind.SERVER,
    startTime: times.root.start,
    attributes: {
      ...identity,
      "gen_ai.operation.name": "invoke_agent",
      "gen_ai.agent.name": "weather",
      "latitude.tags": JSON.stringify(["weather", label]),
      "latitude.metadata": JSON.stringify({ exporter: label, attempt: 2 }),
    },
  });
  const inRoot = trace.setSpan(context.active(), root);
  const chat = tracer.startSpan(
    "chat gpt-4o",
    {
      kind: SpanKind.CLIENT,
      startTime: times.chat.start,
      attributes: {
        ...identity,
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.response.model": "gpt-4o-2024-08-06",
        "gen_ai.response.id": "chatcmpl-weather-1",
        "gen_ai.response.finish_reasons": ["tool_calls"],
        "gen_ai.request.temperature": 0.2,
        "gen_ai.request.max_tokens": 512,
        // OpenAI reports totals: 1200 input of which 200 cached, 300 output of which 50 reasoning.
        "gen_ai.usage.input_tokens": 1200,
        "gen_ai.usage.cache_read.input_tokens": 200,
        "gen_ai.usage.output_tokens": 300,
        "gen_ai.usage.reasoning_tokens": 50,
        "gen_ai.server.time_to_first_token": 0.25,
        "gen_ai.system_instructions": JSON.stringify(SYSTEM),
        "gen_ai.tool.definitions": JSON.stringify(TOOL_DEFINITIONS),
        // OpenAI chat format: normalized to GenAI parts on ingest.
        "gen_ai.input.messages": JSON.stringify([{ role: "user", content: QUESTION }]),
        "gen_ai.output.messages": JSON.stringify([
          { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }] },
        ]),
      },
    },
    inRoot,
  );
  chat.setStatus({ code: SpanStatusCode.OK });
  chat.end(times.chat.end);
  const tool = tracer.startSpan(
    "execute_tool get_weather",
    {
      kind: SpanKind.INTERNAL,
      startTime: times.tool.start,
      attributes: {
        ...identity,
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "get_weather",
        "gen_ai.tool.call.id": "call_1",
        "gen_ai.tool.call.arguments": '{"city":"Paris"}',
        "gen_ai.tool.call.result": '{"temp_c":18,"sky":"sunny"}',
      },
    },
    inRoot,
  );
  tool.end(times.tool.end);
  const answer = tracer.startSpan(
    "chat claude-sonnet-4-5",
    {
      kind: SpanKind.CLIENT,
      startTime: times.answer.start,
      attributes: {
        ...identity,
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.request.model": "claude-sonnet-4-5-20250929",
        "gen_ai.response.finish_reasons": ["end_turn"],
        // Anthropic reports cache reads and writes apart from the input.
        "gen_ai.usage.input_tokens": 500,
        "gen_ai.usage.cache_read.input_tokens": 1000,
        "gen_ai.usage.cache_creation.input_tokens": 200,
        "gen_ai.usage.output_tokens": 400,
        "gen_ai.system_instructions": JSON.stringify(SYSTEM),
        // Already GenAI parts: kept as sent.
        "gen_ai.input.messages": JSON.stringify([
          { role: "user", parts: [{ type: "text", content: QUESTION }] },
          { role: "assistant", parts: [{ type: "tool_call", id: "call_1", name: "get_weather", arguments: { city: "Paris" } }] },
          { role: "tool", parts: [{ type: "tool_call_response", id: "call_1", response: { temp_c: 18, sky: "sunny" } }] },
        ]),
        // Anthropic content blocks.
        "gen_ai.output.messages": JSON.stringify([{ role: "assistant", content: [{ type: "text", text: ANSWER }] }]),
      },
    },
    inRoot,
  );
  answer.end(times.answer.end);
  root.setStatus({ code: SpanStatusCode.OK });
  root.end(times.root.end);

  const spans = exporter.getFinishedSpans();
  const byId = (span: Span) => spans.find((recorded) => recorded.spanContext().spanId === span.spanContext().spanId)!;
  return {
    traceId: root.spanContext().traceId,
    root: root.spanContext().spanId,
    chat: chat.spanContext().spanId,
    tool: tool.spanContext().spanId,
    answer: answer.spanContext().spanId,
    times,
    // The root arrives last, in its own request, after its children.
    requests: [[byId(chat)], [byId(tool), byId(answer)], [byId(root)]],
  };
}

// gpt-4o at $2.50 / $1.25 cached / $10 per 1M tokens, reasoning billed as output; integer microcents.
const CHAT_COST = { input: (1000 * 2.5 + 200 * 1.25) * 100, output: (250 * 10 + 50 * 10) * 100 };
// claude-sonnet-4-5 at $3 / $0.30 cache read / $3.75 cache write / $15 per 1M tokens.
const ANSWER_COST = { input: (500 * 3 + 1000 * 0.3 + 200 * 3.75) * 100, output: 400 * 15 * 100 };

interface Expected {
  label: string;
  serviceName: string;
  /** Whether the spans carry `latitude.project` as an attribute (kept as a typed attribute). */
  spanProjectAttribute?: string;
  resource?: Record<string, string>;
}

/** Asserts the trace, each of its spans and the project's firstTraceAt through the read API. */
async function expectWeatherTrace(account: Account, recorded: WeatherTrace, expected: Expected) {
  const { client, slug } = account;
  const { label } = expected;
  const { times } = recorded;
  const owner = { organizationId: account.organizationId, projectId: account.projectId, traceId: recorded.traceId };

  const detail = await client.traces.get(slug, recorded.traceId);
  expect(detail).toEqual({
    ...owner,
    spanCount: 4,
    errorCount: 0,
    startTime: isoNanos(times.root.start),
    endTime: isoNanos(times.root.end),
    durationNs: nanosBetween(times.root.start, times.root.end),
    // From the trace's start to the chat's first token, which came 250 ms after the chat started.
    timeToFirstTokenNs: nanosBetween(times.root.start, times.chat.start) + 250_000_000,
    tokensInput: 1000 + 500,
    tokensOutput: 250 + 400,
    tokensCacheRead: 200 + 1000,
    tokensCacheCreate: 200,
    tokensReasoning: 50,
    tokensTotal: 1500 + 650 + 1200 + 200 + 50,
    costInputMicrocents: CHAT_COST.input + ANSWER_COST.input,
    costOutputMicrocents: CHAT_COST.output + ANSWER_COST.output,
    costTotalMicrocents: CHAT_COST.input + CHAT_COST.output + ANSWER_COST.input + ANSWER_COST.output,
    sessionId: `session-${label}`,
    userId: `user-${label}`,
    simulationId: null,
    tags: [label, "weather"].sort(),
    models: ["claude-sonnet-4-5-20250929", "gpt-4o"],
    providers: ["anthropic", "openai"],
    serviceNames: [expected.serviceName],
    rootSpanId: recorded.root,
    rootSpanName: "weather-agent",
    positiveAnnotationCount: 0,
    negativeAnnotationCount: 0,
    metadata: { exporter: label, attempt: "2" },
    conversation: [
      { role: "system", parts: SYSTEM },
      { role: "user", parts: [{ type: "text", content: QUESTION }] },
      { role: "assistant", parts: [{ type: "tool_call", id: "call_1", name: "get_weather", arguments: { city: "Paris" } }] },
      { role: "tool", parts: [{ type: "tool_call_response", id: "call_1", response: { temp_c: 18, sky: "sunny" } }] },
      { role: "assistant", parts: [{ type: "text", content: ANSWER }] },
    ],
  });

  const { items } = await client.traces.listSpans(slug, recorded.traceId);
  expect(items.map((span) => span.spanId)).toEqual([recorded.root, recorded.chat, recorded.tool, recorded.answer]);
  for (const span of items) {
    expect(span).toMatchObject({
      ...owner,
      sessionId: `session-${label}`,
      userId: `user-${label}`,
      apiKeyId: account.apiKeyId,
      serviceName: expected.serviceName,
      scopeName: "vigil-ingest-test",
      scopeVersion: "1.2.3",
      traceFlags: 1,
    });
  }

  const chat = await client.traces.getSpan(slug, recorded.traceId, recorded.chat);
  expect(chat).toMatchObject({
    spanId: recorded.chat,
    parentSpanId: recorded.root,
    name: "chat gpt-4o",
    kind: "client",
    statusCode: "ok",
    operation: "chat",
    provider: "openai",
    model: "gpt-4o",
    responseModel: "gpt-4o-2024-08-06",
    responseId: "chatcmpl-weather-1",
    finishReasons: ["tool_calls"],
    startTime: isoNanos(times.chat.start),
    endTime: isoNanos(times.chat.end),
    tokensInput: 1000,
    tokensOutput: 250,
    tokensCacheRead: 200,
    tokensCacheCreate: 0,
    tokensReasoning: 50,
    costInputMicrocents: CHAT_COST.input,
    costOutputMicrocents: CHAT_COST.output,
    costTotalMicrocents: CHAT_COST.input + CHAT_COST.output,
    costIsEstimated: true,
    timeToFirstTokenNs: 250_000_000,
    isStreaming: true,
    tags: [],
    metadata: {},
    systemInstructions: SYSTEM,
    inputMessages: [{ role: "user", parts: [{ type: "text", content: QUESTION }] }],
    outputMessages: [{ role: "assistant", parts: [{ type: "tool_call", id: "call_1", name: "get_weather", arguments: { city: "Paris" } }] }],
    toolDefinitions: [
      { name: "get_weather", description: "Current weather of a city", parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } },
    ],
    toolCallId: "",
    toolName: "",
  });
  expect(chat.costTotalMicrocents).toBeGreaterThan(0);
  expect(chat.attrFloat["gen_ai.request.temperature"]).toBe(0.2);
  expect(chat.attrInt["gen_ai.request.max_tokens"]).toBe(512);
  // Mapped attributes live in their columns only.
  for (const key of ["gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions", "gen_ai.tool.definitions"]) {
    expect(chat.attrString).not.toHaveProperty(key);
  }
  expect(chat.resourceString).toMatchObject({ "service.name": expected.serviceName, ...expected.resource });
  if (expected.spanProjectAttribute) expect(chat.attrString["latitude.project"]).toBe(expected.spanProjectAttribute);

  const tool = await client.traces.getSpan(slug, recorded.traceId, recorded.tool);
  expect(tool).toMatchObject({
    parentSpanId: recorded.root,
    name: "execute_tool get_weather",
    kind: "internal",
    operation: "execute_tool",
    toolCallId: "call_1",
    toolName: "get_weather",
    toolInput: '{"city":"Paris"}',
    toolOutput: '{"temp_c":18,"sky":"sunny"}',
    provider: null,
    model: null,
    tokensInput: 0,
    tokensOutput: 0,
    costTotalMicrocents: 0,
    costIsEstimated: false,
    inputMessages: [],
    outputMessages: [],
  });

  const answer = await client.traces.getSpan(slug, recorded.traceId, recorded.answer);
  expect(answer).toMatchObject({
    parentSpanId: recorded.root,
    operation: "chat",
    provider: "anthropic",
    model: "claude-sonnet-4-5-20250929",
    responseModel: null,
    finishReasons: ["end_turn"],
    tokensInput: 500,
    tokensOutput: 400,
    tokensCacheRead: 1000,
    tokensCacheCreate: 200,
    tokensReasoning: 0,
    costInputMicrocents: ANSWER_COST.input,
    costOutputMicrocents: ANSWER_COST.output,
    costTotalMicrocents: ANSWER_COST.input + ANSWER_COST.output,
    costIsEstimated: true,
    timeToFirstTokenNs: 0,
    isStreaming: false,
    outputMessages: [{ role: "assistant", parts: [{ type: "text", content: ANSWER }] }],
  });
  expect(answer.inputMessages).toHaveLength(3);

  const root = await client.traces.getSpan(slug, recorded.traceId, recorded.root);
  expect(root).toMatchObject({
    parentSpanId: null,
    name: "weather-agent",
    kind: "server",
    statusCode: "ok",
    operation: "invoke_agent",
    // In the span, as sent; the trace's roll-up sorts them.
    tags: ["weather", label],
    metadata: { exporter: label, attempt: "2" },
    costIsEstimated: false,
    costTotalMicrocents: 0,
  });
  expect(root.attrString["gen_ai.agent.name"]).toBe("weather");
  expect(root.attrString).not.toHaveProperty("latitude.tags");
  expect(root.attrString).not.toHaveProperty("latitude.metadata");
}

type ExportResult = { code: number; error?: Error };
interface TraceExporter {
  export(spans: never, done: (result: ExportResult) => void): void;
  shutdown(): Promise<void>;
}

/** One export call = one request; resolves once the receiver acknowledged it, rejects with the exporter's error. */
function send(exporter: TraceExporter, spans: ReadableSpan[]): Promise<void> {
  return new Promise((resolve, reject) =>
    exporter.export(spans as never, (result) => (result.code === 0 ? resolve() : reject(result.error ?? new Error(`export failed with code ${result.code}`)))),
  );
}

/** Sends the trace in its separate requests, checks firstTraceAt around the first one, and makes the rows queryable. */
async function sendInParts(account: Account, exporter: TraceExporter, recorded: WeatherTrace) {
  expect((await account.client.projects.get(account.slug)).firstTraceAt).toBeNull();
  const before = Date.now();
  try {
    await send(exporter, recorded.requests[0]);
    const firstTraceAt = (await account.client.projects.get(account.slug)).firstTraceAt;
    expect(firstTraceAt).not.toBeNull();
    expect(new Date(firstTraceAt!).getTime()).toBeGreaterThanOrEqual(before - 1000);
    expect(new Date(firstTraceAt!).getTime()).toBeLessThanOrEqual(Date.now() + 1000);
    // Each request in its own insert: the roll-up then merges partial aggregates of three blocks at read time.
    await vigil.ctx.spanWriter.flush();
    for (const request of recorded.requests.slice(1)) {
      await send(exporter, request);
      await vigil.ctx.spanWriter.flush();
    }
    // The later requests leave the first span's time alone.
    expect((await account.client.projects.get(account.slug)).firstTraceAt).toBe(firstTraceAt);
  } finally {
    await exporter.shutdown();
  }
}

describe("OpenTelemetry exporters", () => {
  test("exporter-trace-otlp-proto, project from the X-Latitude-Project header", async () => {
    const account = await newAccount("proto");
    const recorded = recordWeatherTrace("proto", {});
    const exporter = new ProtoTraceExporter({
      url: `${vigil.url}/v1/traces`,
      headers: { Authorization: `Bearer ${account.apiKey}`, "X-Latitude-Project": account.slug },
    });
    await sendInParts(account, exporter, recorded);
    await expectWeatherTrace(account, recorded, { label: "proto", serviceName: "weather-service", resource: { "deployment.environment": "test" } });
  });

  test("exporter-trace-otlp-http (JSON), project from the resource attribute", async () => {
    const account = await newAccount("json");
    const recorded = recordWeatherTrace("json", { "latitude.project": account.slug, "service.name": "json-service" });
    const exporter = new JsonTraceExporter({ url: `${vigil.url}/v1/traces`, headers: { Authorization: `Bearer ${account.apiKey}` } });
    await sendInParts(account, exporter, recorded);
    await expectWeatherTrace(account, recorded, { label: "json", serviceName: "json-service", resource: { "latitude.project": account.slug } });
  });

  test("exporter-trace-otlp-http (JSON) with gzip, project by id from a span attribute", async () => {
    const account = await newAccount("gzip");
    const recorded = recordWeatherTrace("gzip", {}, { "latitude.project": account.projectId });
    const exporter = new JsonTraceExporter({
      url: `${vigil.url}/v1/traces`,
      compression: GZIP,
      // The header names a project that does not exist: the span attribute comes first.
      headers: { Authorization: `Bearer ${account.apiKey}`, "X-Latitude-Project": "no-such-project" },
    });
    await sendInParts(account, exporter, recorded);
    await expectWeatherTrace(account, recorded, { label: "gzip", serviceName: "weather-service", spanProjectAttribute: account.projectId });
  });

  test("the gzip exporter really compresses its requests", async () => {
    // Guards the test above: a request through the same exporter config, intercepted, has Content-Encoding: gzip.
    let seen: { encoding: string | null; type: string | null; magic: number[] } | null = null;
    const sink = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      async fetch(request) {
        const bytes = new Uint8Array(await request.arrayBuffer());
        seen = { encoding: request.headers.get("content-encoding"), type: request.headers.get("content-type"), magic: [bytes[0], bytes[1]] };
        return Response.json({});
      },
    });
    try {
      const exporter = new JsonTraceExporter({ url: `http://127.0.0.1:${sink.port}/v1/traces`, compression: GZIP });
      await send(exporter, recordWeatherTrace("probe", {}).requests[0]);
      await exporter.shutdown();
    } finally {
      sink.stop(true);
    }
    expect(seen!).toEqual({ encoding: "gzip", type: "application/json", magic: [0x1f, 0x8b] });
  });

  test("exporter-trace-otlp-grpc against the gRPC receiver, authorization and project in metadata", async () => {
    const account = await newAccount("grpc");
    const recorded = recordWeatherTrace("grpc", { "service.name": "grpc-service" });
    const metadata = new Metadata();
    metadata.set("authorization", `Bearer ${account.apiKey}`);
    metadata.set("x-latitude-project", account.slug);
    const exporter = new GrpcTraceExporter({ url: `http://127.0.0.1:${grpcPort}`, metadata });
    await sendInParts(account, exporter, recorded);
    await expectWeatherTrace(account, recorded, { label: "grpc", serviceName: "grpc-service" });
  });

  test("the gRPC receiver refuses a missing or wrong key with UNAUTHENTICATED, an unknown project with INVALID_ARGUMENT", async () => {
    const account = await newAccount("grpc-refused");
    const recorded = recordWeatherTrace("grpc-refused", {});
    const attempt = async (entries: Record<string, string>) => {
      const metadata = new Metadata();
      for (const [key, value] of Object.entries(entries)) metadata.set(key, value);
      const exporter = new GrpcTraceExporter({ url: `http://127.0.0.1:${grpcPort}`, metadata });
      try {
        await send(exporter, recorded.requests[0]);
        return null;
      } catch (error) {
        return error as Error & { code?: number };
      } finally {
        await exporter.shutdown();
      }
    };
    const UNAUTHENTICATED = 16;
    const INVALID_ARGUMENT = 3;
    expect((await attempt({ "x-latitude-project": account.slug }))?.code).toBe(UNAUTHENTICATED);
    expect((await attempt({ authorization: "Bearer not-a-key", "x-latitude-project": account.slug }))?.code).toBe(UNAUTHENTICATED);
    const unknown = await attempt({ authorization: `Bearer ${account.apiKey}`, "x-latitude-project": "no-such-project" });
    expect(unknown?.code).toBe(INVALID_ARGUMENT);
    expect(unknown?.message).toContain("unknown project");
    expect((await account.client.projects.get(account.slug)).firstTraceAt).toBeNull();
    await vigil.ctx.spanWriter.flush();
    expect((await account.client.traces.list(account.slug)).items).toEqual([]);
  });
});

describe("spans delivered twice", () => {
  // OTLP exporters retry on timeouts and lost connections, so a span can arrive in two requests. The insert skips spans
  // ClickHouse already has, so the `traces` roll-up, which sums every inserted row, counts it once.
  test("a retried export is counted once in the trace roll-up", async () => {
    const account = await newAccount("retry");
    const recorded = recordWeatherTrace("retry", {});
    const exporter = new ProtoTraceExporter({
      url: `${vigil.url}/v1/traces`,
      headers: { Authorization: `Bearer ${account.apiKey}`, "X-Latitude-Project": account.slug },
    });
    try {
      for (const request of recorded.requests) await send(exporter, request);
      await vigil.ctx.spanWriter.flush();
      // The retry: the answer span again, as if the first acknowledgement had been lost.
      await send(exporter, recorded.requests[1]);
      await vigil.ctx.spanWriter.flush();
    } finally {
      await exporter.shutdown();
    }
    expect((await account.client.traces.listSpans(account.slug, recorded.traceId)).items).toHaveLength(4);
    const detail = await account.client.traces.get(account.slug, recorded.traceId);
    expect({ spanCount: detail.spanCount, tokensInput: detail.tokensInput, costTotalMicrocents: detail.costTotalMicrocents }).toEqual({
      spanCount: 4,
      tokensInput: 1500,
      costTotalMicrocents: CHAT_COST.input + CHAT_COST.output + ANSWER_COST.input + ANSWER_COST.output,
    });
  });
});

describe("Vercel AI SDK wrapper spans", () => {
  test("ai.generateText over its doGenerate step: usage and cost counted once, the conversation from the step", async () => {
    const account = await newAccount("vercel");
    const exporter = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ resource: resourceFromAttributes({ "service.name": "vercel-app" }), spanProcessors: [new SimpleSpanProcessor(exporter)] });
    const tracer = provider.getTracer("ai");
    const usage = { "ai.usage.promptTokens": 1000, "ai.usage.completionTokens": 100 };
    const model = { "ai.model.provider": "openai.chat", "ai.model.id": "gpt-4o" };
    const started = Date.now() - 5_000;
    const wrapper = tracer.startSpan("ai.generateText", {
      startTime: started,
      attributes: { "ai.operationId": "ai.generateText", ...model, ...usage, "ai.prompt": JSON.stringify({ prompt: "Hi!" }), "ai.response.text": "Hello there." },
    });
    const step = tracer.startSpan(
      "ai.generateText.doGenerate",
      {
        startTime: started + 10,
        attributes: {
          "ai.operationId": "ai.generateText.doGenerate",
          ...model,
          ...usage,
          "gen_ai.system": "openai.chat",
          "gen_ai.request.model": "gpt-4o",
          "gen_ai.usage.input_tokens": 1000,
          "gen_ai.usage.output_tokens": 100,
          "ai.prompt.messages": JSON.stringify([{ role: "user", content: [{ type: "text", text: "Hi!" }] }]),
          "ai.response.text": "Hello there.",
        },
      },
      trace.setSpan(context.active(), wrapper),
    );
    step.end(started + 900);
    wrapper.end(started + 1_000);
    const traceId = wrapper.spanContext().traceId;
    const otlp = new ProtoTraceExporter({ url: `${vigil.url}/v1/traces`, headers: { Authorization: `Bearer ${account.apiKey}`, "X-Latitude-Project": account.slug } });
    try {
      await send(otlp, exporter.getFinishedSpans());
    } finally {
      await otlp.shutdown();
    }
    await vigil.ctx.spanWriter.flush();

    const spans = (await account.client.traces.listSpans(account.slug, traceId)).items;
    expect(spans.map((span) => [span.name, span.operation, span.tokensInput, span.costTotalMicrocents])).toEqual([
      ["ai.generateText", "chat", 1000, 350_000],
      ["ai.generateText.doGenerate", "chat", 1000, 350_000],
    ]);
    const detail = await account.client.traces.get(account.slug, traceId);
    expect({ tokensInput: detail.tokensInput, tokensOutput: detail.tokensOutput, tokensTotal: detail.tokensTotal, cost: detail.costTotalMicrocents }).toEqual({
      tokensInput: 1000,
      tokensOutput: 100,
      tokensTotal: 1100,
      cost: (1000 * 2.5 + 100 * 10) * 100,
    });
    expect(detail.conversation).toEqual([
      { role: "user", parts: [{ type: "text", content: "Hi!" }] },
      { role: "assistant", parts: [{ type: "text", content: "Hello there." }] },
    ]);
    const analytics = await account.client.traces.analytics(account.slug, { fromIso: new Date(Date.now() - 3600_000).toISOString(), toIso: new Date(Date.now() + 60_000).toISOString() });
    expect({ tokens: analytics.tokens.total, spans: analytics.spans.total, costUsd: analytics.cost.total }).toEqual({ tokens: 1100, spans: 2, costUsd: 0.0035 });
  });
});

describe("@latitude-data/telemetry 3.6.0", () => {
  test("capture() context and manual spans through its own OTLP JSON exporter", async () => {
    const account = await newAccount("telemetry");
    // Read once, when the module is first imported.
    process.env.LATITUDE_TELEMETRY_URL = vigil.url;
    const { Latitude, capture } = await import("@latitude-data/telemetry");
    expect((await account.client.projects.get(account.slug)).firstTraceAt).toBeNull();

    // As in a program of its own: no OpenTelemetry registry that another test file created. The package brings
    // its own @opentelemetry/api 1.9, which refuses a registry made by a newer API copy (1.10 here).
    delete (globalThis as Record<symbol, unknown>)[Symbol.for("opentelemetry.js.api.1")];
    // SimpleSpanProcessor (disableBatch): every span is its own request.
    const latitude = new Latitude({ apiKey: account.apiKey, project: account.slug, disableBatch: true, serviceName: "telemetry-service" });
    const tracer = latitude.getTracer("weather");
    const ids = { capture: "", chat: "", tool: "", traceId: "" };
    await capture(
      "weather-turn",
      async () => {
        const chat = tracer.startSpan("chat gpt-4o-mini", {
          kind: SpanKind.CLIENT,
          attributes: {
            "gen_ai.operation.name": "chat",
            "gen_ai.system": "openai",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.usage.input_tokens": 2000,
            "gen_ai.usage.cache_read.input_tokens": 1000,
            "gen_ai.usage.output_tokens": 100,
            "gen_ai.input.messages": JSON.stringify([
              { role: "system", content: "Be brief." },
              { role: "user", content: QUESTION },
            ]),
            "gen_ai.output.messages": JSON.stringify([{ role: "assistant", content: ANSWER, finish_reason: "stop" }]),
          },
        });
        ids.chat = chat.spanContext().spanId;
        ids.traceId = chat.spanContext().traceId;
        await Bun.sleep(5);
        chat.end();
        const tool = tracer.startSpan("execute_tool get_weather", {
          attributes: {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "get_weather",
            "gen_ai.tool.call.id": "call_9",
            "gen_ai.tool.call.arguments": '{"city":"Paris"}',
            "gen_ai.tool.call.result": '{"temp_c":18}',
          },
        });
        ids.tool = tool.spanContext().spanId;
        tool.end();
      },
      { userId: "user-telemetry", sessionId: "session-telemetry", tags: ["sdk", "telemetry"], metadata: { requestId: "req-1", attempt: 2 } },
    );
    await latitude.flush();
    await latitude.shutdown();
    await vigil.ctx.spanWriter.flush();

    expect((await account.client.projects.get(account.slug)).firstTraceAt).toMatch(/^\d{4}-\d{2}-\d{2}T/);
    const { items } = await account.client.traces.listSpans(account.slug, ids.traceId);
    expect(items).toHaveLength(3);
    const captured = items.find((span) => span.spanId !== ids.chat && span.spanId !== ids.tool)!;
    // gpt-4o-mini: $0.15 / $0.075 cached / $0.60 per 1M tokens.
    const chatCost = { input: 1000 * 0.15 * 100 + 1000 * 0.075 * 100, output: 100 * 0.6 * 100 };

    const detail = await account.client.traces.get(account.slug, ids.traceId);
    expect(detail).toMatchObject({
      traceId: ids.traceId,
      organizationId: account.organizationId,
      projectId: account.projectId,
      spanCount: 3,
      errorCount: 0,
      tokensInput: 1000,
      tokensCacheRead: 1000,
      tokensOutput: 100,
      tokensTotal: 2100,
      costTotalMicrocents: chatCost.input + chatCost.output,
      sessionId: "session-telemetry",
      userId: "user-telemetry",
      tags: ["sdk", "telemetry"],
      models: ["gpt-4o-mini"],
      providers: ["openai"],
      serviceNames: ["telemetry-service"],
      rootSpanId: captured.spanId,
      rootSpanName: "weather-turn",
      metadata: { requestId: "req-1", attempt: "2" },
    });

    for (const span of items) {
      expect(span).toMatchObject({ sessionId: "session-telemetry", userId: "user-telemetry", tags: ["sdk", "telemetry"], apiKeyId: account.apiKeyId });
      if (span.spanId !== captured.spanId) expect(span.parentSpanId).toBe(captured.spanId);
    }
    expect(captured).toMatchObject({ name: "weather-turn", parentSpanId: null, scopeName: "so.latitude.instrumentation.capture" });

    const chat = await account.client.traces.getSpan(account.slug, ids.traceId, ids.chat);
    expect(chat).toMatchObject({
      name: "chat gpt-4o-mini",
      kind: "client",
      scopeName: "so.latitude.instrumentation.weather",
      serviceName: "telemetry-service",
      operation: "chat",
      provider: "openai",
      model: "gpt-4o-mini",
      tokensInput: 1000,
      tokensCacheRead: 1000,
      tokensOutput: 100,
      costInputMicrocents: chatCost.input,
      costOutputMicrocents: chatCost.output,
      costIsEstimated: true,
      finishReasons: ["stop"],
      metadata: { requestId: "req-1", attempt: "2" },
      // A leading system message is the system instructions, whatever the source.
      systemInstructions: [{ type: "text", content: "Be brief." }],
      inputMessages: [{ role: "user", parts: [{ type: "text", content: QUESTION }] }],
      outputMessages: [{ role: "assistant", parts: [{ type: "text", content: ANSWER }], finish_reason: "stop" }],
    });
    expect(chat.costTotalMicrocents).toBeGreaterThan(0);
    expect(chat.attrString["latitude.capture.name"]).toBe("weather-turn");

    const tool = await account.client.traces.getSpan(account.slug, ids.traceId, ids.tool);
    expect(tool).toMatchObject({
      operation: "execute_tool",
      toolName: "get_weather",
      toolCallId: "call_9",
      toolInput: '{"city":"Paris"}',
      toolOutput: '{"temp_c":18}',
      costIsEstimated: false,
    });
  });
});
