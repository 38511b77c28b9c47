// Popular instrumentation libraries, installed from npm, call a local OpenAI-compatible provider (streaming with
// usage, tool calls) and export to a running Vigil; every field a user looks for first is read back through the
// official SDK's read API. Python libraries cannot be installed here: their exports are rebuilt from their sources
// (file and commit named at each case) and sent through the real OTLP exporter.
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import type { LatitudeClient } from "@latitude-data/sdk";
import { context, trace, type Attributes, type Tracer } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan, type SpanExporter, type SpanProcessor } from "@opentelemetry/sdk-trace-base";
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";
import { findModelPrice } from "../src/ingest/price";
import type { Vigil } from "../src/server";
import { FAKE_ANSWER, FAKE_RESPONSE_MODEL, FAKE_TOOL_CALL, startFakeOpenAI, type FakeOpenAI } from "./fake-openai";
import { bootstrapAccount, startTestVigil } from "./helpers";

setDefaultTimeout(60_000);

let vigil: Vigil;
let fake: FakeOpenAI;

beforeAll(async () => {
  // Parent spans and propagated attributes follow the active context across awaits, as in an instrumented app.
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  vigil = await startTestVigil();
  fake = startFakeOpenAI();
});

// Stopping waits for the stores: under load it takes longer than a hook's default 5 s.
afterAll(async () => {
  fake?.stop();
  await vigil?.stop();
}, 60_000);

interface Account {
  client: LatitudeClient;
  slug: string;
  apiKey: string;
}

async function newAccount(label: string): Promise<Account> {
  const { account, client } = await bootstrapAccount(vigil.url, { projectName: `Libraries ${label} ${Math.random().toString(36).slice(2, 8)}` });
  return { client, slug: account.projectSlug, apiKey: account.apiKey };
}

const traceExporter = (account: Account) =>
  new OTLPTraceExporter({ url: `${vigil.url}/v1/traces`, headers: { Authorization: `Bearer ${account.apiKey}`, "X-Latitude-Project": account.slug } });

/** A tracer provider exporting each span to Vigil as it ends, and keeping it in memory to know its ids. */
function providerFor(account: Account, service: string, exportProcessor: SpanProcessor = new SimpleSpanProcessor(traceExporter(account))) {
  const memory = new InMemorySpanExporter();
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ "service.name": service }),
    spanProcessors: [exportProcessor, new SimpleSpanProcessor(memory)],
  });
  return { provider, memory };
}

/** Langfuse's own span processor (it applies propagated trace attributes), exporting to Vigil. */
async function langfuseProviderFor(account: Account) {
  const { LangfuseSpanProcessor } = await import("@langfuse/otel");
  return providerFor(account, "langfuse-app", new LangfuseSpanProcessor({ exporter: traceExporter(account), publicKey: "pk-test", secretKey: "sk-test", flushAt: 1, mediaUploadEnabled: false }));
}

/** Waits until Vigil holds every exported span, then reads one back in full. */
async function stored(account: Account, span: ReadableSpan) {
  await vigil.ctx.spanWriter.flush();
  return account.client.traces.getSpan(account.slug, span.spanContext().traceId, span.spanContext().spanId);
}

const byName = (spans: ReadableSpan[], name: string) => spans.filter((span) => span.name === name);

// The fake provider's usage: 120 prompt tokens of which 20 cached, 30 completion tokens of which 10 reasoning.
const FAKE_TOKENS = { tokensInput: 100, tokensOutput: 20, tokensCacheRead: 20, tokensCacheCreate: 0, tokensReasoning: 10 };

/** The listed price of the fake's usage for `model` (gpt-4o-mini), in microcents: what Vigil estimates. */
function listedCost(model: string, tokens = FAKE_TOKENS) {
  const price = findModelPrice("openai", model)!;
  const rate = 100_000_000 / 1_000_000;
  const input = Math.round((tokens.tokensInput * price.input + tokens.tokensCacheRead * price.cacheRead + tokens.tokensCacheCreate * price.cacheWrite) * rate);
  const output = Math.round((tokens.tokensOutput * price.output + tokens.tokensReasoning * price.reasoning) * rate);
  return input + output;
}

const SYSTEM = "You are a weather bot.";
const QUESTION = "What is the weather in Paris?";
const TOOLS = [
  { type: "function" as const, function: { name: "get_weather", description: "Current weather of a city", parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } } },
];
const text = (content: string) => ({ type: "text", content });
const TOOL_CALL_PART = { type: "tool_call", id: FAKE_TOOL_CALL.id, name: FAKE_TOOL_CALL.name, arguments: { city: "Paris" } };
const TOOL_RESULT = { temperature: 18, sky: "sunny" };

/** The two OpenAI calls of one agent turn: the model asks for the tool (not streamed), then answers (streamed). */
async function weatherTurn(openai: { chat: { completions: { create: (body: never) => Promise<unknown> } } }, extra: Record<string, unknown> = {}) {
  const messages = [
    { role: "system", content: SYSTEM },
    { role: "user", content: QUESTION },
  ];
  await openai.chat.completions.create({ model: "gpt-4o-mini", messages, tools: TOOLS, ...extra } as never);
  const followUp = [
    ...messages,
    { role: "assistant", content: null, tool_calls: [{ id: FAKE_TOOL_CALL.id, type: "function", function: { name: FAKE_TOOL_CALL.name, arguments: FAKE_TOOL_CALL.arguments } }] },
    { role: "tool", tool_call_id: FAKE_TOOL_CALL.id, content: JSON.stringify(TOOL_RESULT) },
  ];
  const stream = (await openai.chat.completions.create({ model: "gpt-4o-mini", messages: followUp, stream: true, stream_options: { include_usage: true }, ...extra } as never)) as AsyncIterable<unknown>;
  for await (const _ of stream) {
    // drained: the span ends with the stream
  }
}

/** The conversation every OpenAI-chat source must read the same: the system prompt as system instructions. */
const FOLLOW_UP_INPUT = [
  { role: "user", parts: [text(QUESTION)] },
  { role: "assistant", parts: [TOOL_CALL_PART] },
  { role: "tool", parts: [{ type: "tool_call_response", id: FAKE_TOOL_CALL.id, response: TOOL_RESULT }] },
];

describe("OpenInference: @arizeai/openinference-instrumentation-openai", () => {
  test("tool call and streamed answer: requested and response model, finish reasons, streaming, system instructions", async () => {
    const { OpenAIInstrumentation } = await import("@arizeai/openinference-instrumentation-openai");
    const OpenAI = (await import("openai")).default;
    const account = await newAccount("openinference");
    const { provider, memory } = providerFor(account, "oi-openai");
    const instrumentation = new OpenAIInstrumentation();
    instrumentation.setTracerProvider(provider);
    instrumentation.manuallyInstrument(OpenAI as never);
    try {
      await weatherTurn(new OpenAI({ baseURL: fake.url, apiKey: "test" }) as never, { user: "user-7" });
    } finally {
      instrumentation.disable();
      await provider.forceFlush();
    }
    const [first, second] = byName(memory.getFinishedSpans(), "OpenAI Chat Completions");
    const asked = await stored(account, first);
    expect(asked).toMatchObject({
      operation: "chat",
      provider: "openai",
      model: "gpt-4o-mini",
      responseModel: FAKE_RESPONSE_MODEL,
      ...FAKE_TOKENS,
      costTotalMicrocents: listedCost(FAKE_RESPONSE_MODEL),
      costIsEstimated: true,
      isStreaming: false,
      finishReasons: ["tool_calls"],
      systemInstructions: [text(SYSTEM)],
      inputMessages: [{ role: "user", parts: [text(QUESTION)] }],
      outputMessages: [{ role: "assistant", parts: [TOOL_CALL_PART] }],
    });
    expect(asked.toolDefinitions.map((tool) => tool.name)).toEqual(["get_weather"]);

    // The JavaScript instrumentation records neither usage nor a first-token event for streams: streaming is
    // known from the request parameters alone.
    const answered = await stored(account, second);
    expect(answered).toMatchObject({
      operation: "chat",
      provider: "openai",
      model: "gpt-4o-mini",
      isStreaming: true,
      finishReasons: ["stop"],
      systemInstructions: [text(SYSTEM)],
      inputMessages: FOLLOW_UP_INPUT,
      outputMessages: [{ role: "assistant", parts: [text(FAKE_ANSWER)] }],
    });
  });
});

describe("OpenInference: @arizeai/openinference-instrumentation-langchain with @langchain/openai", () => {
  test("provider and requested model from LangChain's run metadata, the tool span's call id and result", async () => {
    const { LangChainInstrumentation } = await import("@arizeai/openinference-instrumentation-langchain");
    const callbackManager = await import("@langchain/core/callbacks/manager");
    const { ChatOpenAI } = await import("@langchain/openai");
    const { tool } = await import("@langchain/core/tools");
    const account = await newAccount("langchain");
    const { provider, memory } = providerFor(account, "oi-langchain");
    const instrumentation = new LangChainInstrumentation();
    instrumentation.setTracerProvider(provider);
    instrumentation.manuallyInstrument(callbackManager as never);
    const weather = tool(async () => JSON.stringify(TOOL_RESULT), {
      name: "get_weather",
      description: "Current weather of a city",
      schema: TOOLS[0].function.parameters as never,
    });
    const model = new ChatOpenAI({ model: "gpt-4o-mini", apiKey: "test", configuration: { baseURL: fake.url }, streaming: true, streamUsage: true });
    const prompt: [string, string][] = [
      ["system", SYSTEM],
      ["human", QUESTION],
    ];
    try {
      const asked = await model.bindTools([weather]).invoke(prompt);
      const result = await weather.invoke(asked.tool_calls![0] as never);
      await model.invoke([...prompt, asked, result] as never);
    } finally {
      instrumentation.disable();
      await provider.forceFlush();
    }
    const spans = memory.getFinishedSpans();
    const [first, second] = byName(spans, "ChatOpenAI");
    const asked = await stored(account, first);
    expect(asked).toMatchObject({
      operation: "chat",
      provider: "openai",
      model: "gpt-4o-mini",
      ...FAKE_TOKENS,
      costTotalMicrocents: listedCost("gpt-4o-mini"),
      isStreaming: true,
      finishReasons: ["tool_calls"],
      systemInstructions: [text(SYSTEM)],
      inputMessages: [{ role: "user", parts: [text(QUESTION)] }],
    });
    expect(asked.outputMessages[0].parts).toEqual([expect.objectContaining({ type: "tool_call", name: "get_weather", arguments: { city: "Paris" } })]);
    expect(asked.metadata).toMatchObject({ ls_provider: "openai", ls_model_name: "gpt-4o-mini" });

    const toolSpan = await stored(account, byName(spans, "get_weather")[0]);
    expect(toolSpan).toMatchObject({ operation: "execute_tool", toolName: "get_weather", toolCallId: FAKE_TOOL_CALL.id, toolOutput: JSON.stringify(TOOL_RESULT) });

    const answered = await stored(account, second);
    expect(answered).toMatchObject({ isStreaming: true, finishReasons: ["stop"], systemInstructions: [text(SYSTEM)], outputMessages: [{ role: "assistant", parts: [text(FAKE_ANSWER)] }] });
    // LangChain's tool message carries no call id through OpenInference: the result keeps its one shape all the same.
    expect(answered.inputMessages[2]).toEqual({ role: "tool", parts: [{ type: "tool_call_response", id: null, response: TOOL_RESULT }] });
  });
});

describe("Langfuse: @langfuse/tracing + @langfuse/openai + @langfuse/otel", () => {
  test("generations: model, usage details, completion start, model parameters, input and output; tool observations; trace attributes", async () => {
    const { observeOpenAI } = await import("@langfuse/openai");
    const { startActiveObservation, propagateAttributes, setLangfuseTracerProvider } = await import("@langfuse/tracing");
    const OpenAI = (await import("openai")).default;
    const account = await newAccount("langfuse");
    const { provider, memory } = await langfuseProviderFor(account);
    setLangfuseTracerProvider(provider);
    const openai = observeOpenAI(new OpenAI({ baseURL: fake.url, apiKey: "test" }) as never) as never;
    try {
      await startActiveObservation("weather-agent", async () => {
        await propagateAttributes({ userId: "user-7", sessionId: "session-1", metadata: { tier: "gold" }, tags: ["weather"] } as never, async () => {
          await weatherTurn(openai);
          await startActiveObservation("get_weather", async (observation) => observation.update({ input: { city: "Paris" }, output: TOOL_RESULT }), { asType: "tool" } as never);
        });
      });
    } finally {
      setLangfuseTracerProvider(null);
      await provider.forceFlush();
    }
    const spans = memory.getFinishedSpans();
    const [first, second] = byName(spans, "OpenAI.chat");
    const asked = await stored(account, first);
    expect(asked).toMatchObject({
      operation: "chat",
      model: FAKE_RESPONSE_MODEL,
      responseModel: FAKE_RESPONSE_MODEL,
      ...FAKE_TOKENS,
      costTotalMicrocents: listedCost(FAKE_RESPONSE_MODEL),
      isStreaming: false,
      systemInstructions: [text(SYSTEM)],
      inputMessages: [{ role: "user", parts: [text(QUESTION)] }],
      outputMessages: [{ role: "assistant", parts: [TOOL_CALL_PART] }],
    });
    expect(asked.toolDefinitions.map((tool) => tool.name)).toEqual(["get_weather"]);

    const answered = await stored(account, second);
    expect(answered).toMatchObject({ isStreaming: true, inputMessages: FOLLOW_UP_INPUT, outputMessages: [{ role: "assistant", parts: [text(FAKE_ANSWER)] }] });
    expect(answered.timeToFirstTokenNs).toBeGreaterThan(0);

    const toolSpan = await stored(account, byName(spans, "get_weather")[0]);
    expect(toolSpan).toMatchObject({ operation: "execute_tool", toolName: "get_weather", toolInput: '{"city":"Paris"}', toolOutput: JSON.stringify(TOOL_RESULT) });

    // Propagated to every observation started inside `propagateAttributes`.
    expect(toolSpan).toMatchObject({ sessionId: "session-1", userId: "user-7", tags: ["weather"], metadata: { tier: "gold" } });
    expect(answered).toMatchObject({ sessionId: "session-1", userId: "user-7" });
    const detail = await account.client.traces.get(account.slug, toolSpan.traceId);
    expect(detail).toMatchObject({ sessionId: "session-1", userId: "user-7" });
    expect(detail.conversation[0]).toEqual({ role: "system", parts: [text(SYSTEM)] });
  });

  test("cost details sent by the application are taken as they are", async () => {
    const { startObservation, setLangfuseTracerProvider } = await import("@langfuse/tracing");
    const account = await newAccount("langfuse-cost");
    const { provider, memory } = providerFor(account, "langfuse-app");
    setLangfuseTracerProvider(provider);
    try {
      startObservation("manual-generation", { model: "gpt-4o-mini", usageDetails: { input: 10, output: 5 }, costDetails: { input: 0.001, output: 0.002 } } as never, { asType: "generation" }).end();
    } finally {
      setLangfuseTracerProvider(null);
      await provider.forceFlush();
    }
    const generation = await stored(account, memory.getFinishedSpans()[0]);
    expect(generation).toMatchObject({ model: "gpt-4o-mini", tokensInput: 10, tokensOutput: 5, costInputMicrocents: 100_000, costOutputMicrocents: 200_000, costIsEstimated: false });
  });
});

describe("OpenLLMetry: @traceloop/node-server-sdk", () => {
  test("chat spans in GenAI conventions, a tool entity, association properties", async () => {
    const traceloop = await import("@traceloop/node-server-sdk");
    const OpenAI = (await import("openai")).default;
    const account = await newAccount("traceloop");
    const memory = new InMemorySpanExporter();
    const exporter = traceExporter(account);
    const both: SpanExporter = {
      export: (spans, done) => {
        memory.export(spans, () => {});
        exporter.export(spans, done);
      },
      shutdown: async () => {
        await exporter.shutdown();
      },
      forceFlush: () => exporter.forceFlush(),
    };
    traceloop.initialize({ exporter: both, disableBatch: true, instrumentModules: { openAI: OpenAI as never }, silenceInitializationMessage: true, appName: "traceloop-app", traceloopSyncEnabled: false } as never);
    try {
      await traceloop.withWorkflow({ name: "weather", associationProperties: { session_id: "session-2", user_id: "user-9", tenant: "acme" } }, async () => {
        await weatherTurn(new OpenAI({ baseURL: fake.url, apiKey: "test" }) as never);
        await traceloop.withTool({ name: "get_weather" }, async () => TOOL_RESULT);
      });
    } finally {
      await traceloop.forceFlush();
    }
    const spans = memory.getFinishedSpans();
    const [first, second] = byName(spans, "chat gpt-4o-mini");
    const asked = await stored(account, first);
    expect(asked).toMatchObject({
      operation: "chat",
      provider: "openai",
      model: "gpt-4o-mini",
      responseModel: FAKE_RESPONSE_MODEL,
      finishReasons: ["tool_call"],
      systemInstructions: [text(SYSTEM)],
      inputMessages: [{ role: "user", parts: [text(QUESTION)] }],
      outputMessages: [{ role: "assistant", finish_reason: "tool_call", parts: [TOOL_CALL_PART] }],
    });
    expect(asked.tokensInput + asked.tokensCacheRead).toBe(120);
    expect(asked.costTotalMicrocents).toBeGreaterThan(0);
    const answered = await stored(account, second);
    // The tool result, sent as JSON text in a GenAI part, has the same shape as from every other source.
    expect(answered.inputMessages).toEqual(FOLLOW_UP_INPUT);
    const toolSpan = await stored(account, spans.find((span) => span.name === "get_weather.tool")!);
    expect(toolSpan).toMatchObject({ operation: "execute_tool", toolName: "get_weather", toolOutput: JSON.stringify(TOOL_RESULT) });
    const workflow = await stored(account, spans.find((span) => span.name === "weather.workflow")!);
    expect(workflow).toMatchObject({ sessionId: "session-2", userId: "user-9", metadata: expect.objectContaining({ tenant: "acme" }) });
  });
});

// ---- Python libraries: their exports rebuilt from their sources -----------------------------------------------

/** Records spans through a real SDK provider (so ids, times and the OTLP encoding are the SDK's own). */
async function pythonExport(account: Account, record: (tracer: Tracer) => void) {
  const { provider, memory } = providerFor(account, "python-app");
  record(provider.getTracer("python"));
  await provider.forceFlush();
  return memory.getFinishedSpans();
}

function endAfter(tracer: Tracer, name: string, attributes: Attributes, events: { name: string; afterMs: number; attributes?: Attributes }[] = [], durationMs = 400) {
  const start = Date.now() - 1_000;
  const span = tracer.startSpan(name, { attributes, startTime: start });
  for (const event of events) span.addEvent(event.name, event.attributes ?? {}, start + event.afterMs);
  span.end(start + durationMs);
}

describe("OpenInference (Python openinference-instrumentation-openai)", () => {
  // Arize-ai/openinference@1fe497f1d9f45a07eee55d97fe185e020560f9c7:
  // python/instrumentation/openinference-instrumentation-openai/src/openinference/instrumentation/openai/_stream.py
  // (`First Token Stream Event` at the first chunk), _request.py (`llm.system`, `llm.provider`, invocation parameters),
  // _response_attributes_extractor.py (`llm.finish_reason`); semconv `tool.id`.
  const streamed = {
    "openinference.span.kind": "LLM",
    "llm.system": "openai",
    "llm.provider": "openai",
    "llm.model_name": FAKE_RESPONSE_MODEL,
    "llm.invocation_parameters": JSON.stringify({ model: "gpt-4o-mini", stream: true, stream_options: { include_usage: true } }),
    "llm.input_messages.0.message.role": "system",
    "llm.input_messages.0.message.content": SYSTEM,
    "llm.input_messages.1.message.role": "user",
    "llm.input_messages.1.message.content": QUESTION,
    "llm.output_messages.0.message.role": "assistant",
    "llm.output_messages.0.message.content": FAKE_ANSWER,
    "llm.finish_reason": "stop",
    "llm.token_count.prompt": 120,
    "llm.token_count.completion": 30,
    "llm.token_count.prompt_details.cache_read": 20,
    "llm.token_count.completion_details.reasoning": 10,
    "session.id": "session-py",
    "user.id": "user-py",
    metadata: JSON.stringify({ tenant: "acme" }),
  };

  test("streamed chat: the first-token event, the requested model, the finish reason", async () => {
    const account = await newAccount("oi-python");
    const [span] = await pythonExport(account, (tracer) => endAfter(tracer, "ChatCompletion", streamed, [{ name: "First Token Stream Event", afterMs: 250 }]));
    expect(await stored(account, span)).toMatchObject({
      operation: "chat",
      provider: "openai",
      model: "gpt-4o-mini",
      responseModel: FAKE_RESPONSE_MODEL,
      ...FAKE_TOKENS,
      costTotalMicrocents: listedCost(FAKE_RESPONSE_MODEL),
      isStreaming: true,
      timeToFirstTokenNs: 250_000_000,
      finishReasons: ["stop"],
      systemInstructions: [text(SYSTEM)],
      inputMessages: [{ role: "user", parts: [text(QUESTION)] }],
      outputMessages: [{ role: "assistant", parts: [text(FAKE_ANSWER)] }],
      sessionId: "session-py",
      userId: "user-py",
      metadata: { tenant: "acme" },
    });
  });

  test("non-streamed chat is not streaming; a TOOL span keeps its tool.id", async () => {
    const account = await newAccount("oi-python-tool");
    const [chat, toolSpan] = await pythonExport(account, (tracer) => {
      endAfter(tracer, "ChatCompletion", { ...streamed, "llm.invocation_parameters": JSON.stringify({ model: "gpt-4o-mini" }), "llm.finish_reason": "tool_calls" });
      endAfter(tracer, "get_weather", {
        "openinference.span.kind": "TOOL",
        "tool.name": "get_weather",
        "tool.id": FAKE_TOOL_CALL.id,
        "input.value": FAKE_TOOL_CALL.arguments,
        "output.value": JSON.stringify(TOOL_RESULT),
      });
    });
    expect(await stored(account, chat)).toMatchObject({ isStreaming: false, timeToFirstTokenNs: 0, finishReasons: ["tool_calls"] });
    expect(await stored(account, toolSpan)).toMatchObject({
      operation: "execute_tool",
      toolName: "get_weather",
      toolCallId: FAKE_TOOL_CALL.id,
      toolInput: FAKE_TOOL_CALL.arguments,
      toolOutput: JSON.stringify(TOOL_RESULT),
    });
  });
});

describe("OpenLLMetry (Python opentelemetry-instrumentation-openai 0.62.1)", () => {
  // traceloop/openllmetry@93429cfb9767e6b51db6cb35f6b70f758117669a:
  // packages/opentelemetry-instrumentation-openai/opentelemetry/instrumentation/openai/shared/__init__.py
  // (`gen_ai.user` from `user=`, `gen_ai.is_streaming`), shared/chat_wrappers.py (`gen_ai.input.messages` with the
  // system message first, tool results as sent, one `gen_ai.content.completion.chunk` event per streamed chunk).
  test("streamed chat: streaming flag, first chunk event, user; system message as instructions; tool result shape", async () => {
    const account = await newAccount("openllmetry-python");
    const input = [
      { role: "system", parts: [text(SYSTEM)] },
      { role: "user", parts: [text(QUESTION)] },
      { role: "assistant", parts: [{ type: "tool_call", name: "get_weather", id: FAKE_TOOL_CALL.id, arguments: { city: "Paris" } }] },
      { role: "tool", parts: [{ type: "tool_call_response", id: FAKE_TOOL_CALL.id, response: JSON.stringify(TOOL_RESULT) }] },
    ];
    const [span] = await pythonExport(account, (tracer) =>
      endAfter(
        tracer,
        "openai.chat",
        {
          "gen_ai.provider.name": "openai",
          "gen_ai.operation.name": "chat",
          "gen_ai.request.model": "gpt-4o-mini",
          "gen_ai.response.model": FAKE_RESPONSE_MODEL,
          "gen_ai.user": "user-11",
          "gen_ai.is_streaming": true,
          "gen_ai.input.messages": JSON.stringify(input),
          "gen_ai.output.messages": JSON.stringify([{ role: "assistant", finish_reason: "stop", parts: [text(FAKE_ANSWER)] }]),
          "gen_ai.response.finish_reasons": ["stop"],
          "gen_ai.usage.input_tokens": 120,
          "gen_ai.usage.output_tokens": 30,
          "gen_ai.usage.cache_read_input_tokens": 20,
          "gen_ai.usage.reasoning_tokens": 10,
          "traceloop.association.properties.session_id": "session-ol",
        },
        [
          { name: "gen_ai.content.completion.chunk", afterMs: 120 },
          { name: "gen_ai.content.completion.chunk", afterMs: 180 },
        ],
      ),
    );
    expect(await stored(account, span)).toMatchObject({
      operation: "chat",
      provider: "openai",
      model: "gpt-4o-mini",
      responseModel: FAKE_RESPONSE_MODEL,
      ...FAKE_TOKENS,
      costTotalMicrocents: listedCost(FAKE_RESPONSE_MODEL),
      isStreaming: true,
      timeToFirstTokenNs: 120_000_000,
      finishReasons: ["stop"],
      systemInstructions: [text(SYSTEM)],
      inputMessages: FOLLOW_UP_INPUT,
      userId: "user-11",
      sessionId: "session-ol",
    });
  });
});

describe("OpenLLMetry (Python), not streamed, with a tool", () => {
  // traceloop/openllmetry@93429cfb9767e6b51db6cb35f6b70f758117669a: the chat span as above with `gen_ai.is_streaming`
  // false and no chunk events; packages/traceloop-sdk/traceloop/sdk/decorators/base.py for the `@tool` span
  // (`traceloop.span.kind`, `traceloop.entity.name`, `.input` as `{"args", "kwargs"}`, `.output`).
  test("the asking call is not streaming; the tool entity keeps its name, input and output", async () => {
    const account = await newAccount("openllmetry-python-tool");
    const [chat, toolSpan] = await pythonExport(account, (tracer) => {
      endAfter(tracer, "openai.chat", {
        "gen_ai.provider.name": "openai",
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.response.model": FAKE_RESPONSE_MODEL,
        "gen_ai.is_streaming": false,
        "gen_ai.input.messages": JSON.stringify([{ role: "system", parts: [text(SYSTEM)] }, { role: "user", parts: [text(QUESTION)] }]),
        "gen_ai.output.messages": JSON.stringify([{ role: "assistant", finish_reason: "tool_call", parts: [TOOL_CALL_PART] }]),
        "gen_ai.response.finish_reasons": ["tool_call"],
        "gen_ai.usage.input_tokens": 120,
        "gen_ai.usage.output_tokens": 30,
      });
      endAfter(tracer, "get_weather.tool", {
        "traceloop.span.kind": "tool",
        "traceloop.entity.name": "get_weather",
        "traceloop.entity.input": JSON.stringify({ args: [], kwargs: { city: "Paris" } }),
        "traceloop.entity.output": JSON.stringify(TOOL_RESULT),
      });
    });
    expect(await stored(account, chat)).toMatchObject({
      operation: "chat",
      provider: "openai",
      model: "gpt-4o-mini",
      responseModel: FAKE_RESPONSE_MODEL,
      tokensInput: 120,
      tokensOutput: 30,
      costTotalMicrocents: listedCost(FAKE_RESPONSE_MODEL, { tokensInput: 120, tokensOutput: 30, tokensCacheRead: 0, tokensCacheCreate: 0, tokensReasoning: 0 }),
      isStreaming: false,
      timeToFirstTokenNs: 0,
      finishReasons: ["tool_call"],
      systemInstructions: [text(SYSTEM)],
      inputMessages: [{ role: "user", parts: [text(QUESTION)] }],
      outputMessages: [{ role: "assistant", finish_reason: "tool_call", parts: [TOOL_CALL_PART] }],
    });
    expect(await stored(account, toolSpan)).toMatchObject({
      operation: "execute_tool",
      toolName: "get_weather",
      toolInput: JSON.stringify({ args: [], kwargs: { city: "Paris" } }),
      toolOutput: JSON.stringify(TOOL_RESULT),
    });
  });
});

describe("Vercel AI SDK telemetry", () => {
  // The installed `ai` (7) no longer emits OpenTelemetry spans itself; these are the attributes `ai` 6 sends with
  // `experimental_telemetry: {isEnabled: true, metadata: {...}}` (ai.telemetry.metadata.<key>).
  test("metadata keys, sessionId and userId from telemetry metadata; the streamText wrapper is streaming", async () => {
    const account = await newAccount("vercel");
    const [wrapper] = await pythonExport(account, (tracer) =>
      endAfter(tracer, "ai.streamText", {
        "ai.operationId": "ai.streamText",
        "ai.model.provider": "openai.chat",
        "ai.model.id": "gpt-4o-mini",
        "ai.telemetry.metadata.sessionId": "session-v",
        "ai.telemetry.metadata.userId": "user-v",
        "ai.telemetry.metadata.feature": "weather",
        "ai.prompt": JSON.stringify({ system: SYSTEM, prompt: QUESTION }),
        "ai.response.text": FAKE_ANSWER,
        "ai.usage.inputTokens": 120,
        "ai.usage.outputTokens": 30,
      }),
    );
    expect(await stored(account, wrapper)).toMatchObject({
      operation: "chat",
      provider: "openai",
      isStreaming: true,
      sessionId: "session-v",
      userId: "user-v",
      metadata: { sessionId: "session-v", userId: "user-v", feature: "weather" },
      systemInstructions: [text(SYSTEM)],
      inputMessages: [{ role: "user", parts: [text(QUESTION)] }],
    });
  });
});

// The context manager some libraries install must not leak into the next file's spans.
afterAll(() => {
  trace.disable();
  context.disable();
});
