import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { JsonTraceSerializer, ProtobufTraceSerializer } from "@opentelemetry/otlp-transformer";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import type { AttributeValue } from "../src/ingest/attributes";
import { decodeJson, decodeProtobuf, type DecodedEvent, type DecodedSpan } from "../src/ingest/decode";
import { mapResource, mapSpan, mapTraces } from "../src/ingest/map";
import { normalizeProvider } from "../src/ingest/map-operation";
import { nanosBetween } from "../src/ingest/map-usage";

setDefaultTimeout(60_000);

const owner = { organizationId: "org_1", projectId: "project_1", apiKeyId: "key_1" };
const resource = mapResource(new Map<string, AttributeValue>([["service.name", "support-agent"], ["host.cores", 8]]));
const START = "1763000000000000000";

function decodedSpan(attributes: Record<string, AttributeValue>, overrides: Partial<DecodedSpan> = {}): DecodedSpan {
  return {
    traceId: "0af7651916cd43dd8448eb211c80319c",
    spanId: "b7ad6b7169203331",
    parentSpanId: "",
    traceState: "",
    flags: 0x101,
    name: "span",
    kind: "client",
    startTimeUnixNano: START,
    endTimeUnixNano: "1763000002500000000",
    attributes: new Map(Object.entries(attributes)),
    events: [],
    links: [],
    statusCode: "unset",
    statusMessage: "",
    ...overrides,
  };
}

const map = (attributes: Record<string, AttributeValue>, overrides: Partial<DecodedSpan> = {}) =>
  mapSpan(decodedSpan(attributes, overrides), resource, { name: "scope", version: "1.0" }, owner);

const event = (name: string, timeUnixNano: string, attributes: Record<string, AttributeValue> = {}): DecodedEvent => ({
  name,
  timeUnixNano,
  attributes: new Map(Object.entries(attributes)),
});

describe("span identity and OTLP fields", () => {
  test("ids, times, enums, scope, resource, owner", () => {
    const row = map({}, { parentSpanId: "00f067aa0ba902b7", statusCode: "error", statusMessage: "boom", traceState: "k=v", name: "chat" });
    expect(row).toMatchObject({
      organization_id: "org_1",
      project_id: "project_1",
      api_key_id: "key_1",
      trace_id: "0af7651916cd43dd8448eb211c80319c",
      span_id: "b7ad6b7169203331",
      parent_span_id: "00f067aa0ba902b7",
      name: "chat",
      kind: "client",
      status_code: "error",
      status_message: "boom",
      trace_state: "k=v",
      trace_flags: 1,
      scope_name: "scope",
      scope_version: "1.0",
      service_name: "support-agent",
      start_time: START,
      end_time: "1763000002500000000",
      duration_ns: 2_500_000_000,
      resource_string: { "service.name": "support-agent", "host.cores": "8" },
      operation: "unspecified",
      retention_days: 0,
    });
  });

  test("events and links as JSON arrays, empty string when none", () => {
    const row = map(
      {},
      {
        events: [event("exception", "1763000000000000100", { "exception.type": "TimeoutError" })],
        links: [{ traceId: "4bf92f3577b34da6a3ce929d0e0e4736", spanId: "00f067aa0ba902b7", traceState: "", flags: 1, attributes: new Map([["why", "retry"]]) }],
      },
    );
    expect(JSON.parse(row.events_json)).toEqual([{ name: "exception", timeUnixNano: "1763000000000000100", attributes: { "exception.type": "TimeoutError" } }]);
    expect(JSON.parse(row.links_json)).toEqual([{ traceId: "4bf92f3577b34da6a3ce929d0e0e4736", spanId: "00f067aa0ba902b7", traceState: "", flags: 1, attributes: { why: "retry" } }]);
    const bare = map({});
    expect(bare.events_json).toBe("");
    expect(bare.links_json).toBe("");
    expect(bare.input_messages).toBe("");
    expect(bare.tool_definitions).toBe("");
  });

  test("every attribute lands in the typed maps as sent, those columns read too; arrays and objects as JSON", () => {
    const row = map({
      "gen_ai.request.model": "gpt-4o",
      "gen_ai.request.temperature": 0.2,
      "gen_ai.request.max_tokens": 512,
      "gen_ai.request.stop_sequences": ["\n\n"],
      "app.flag": false,
      "app.config": { depth: 2 },
      "app.empty": null,
      "user.email": "ada@example.com",
    });
    expect(row.model).toBe("gpt-4o");
    expect(row.attr_string).toEqual({ "gen_ai.request.model": "gpt-4o", "gen_ai.request.stop_sequences": '["\\n\\n"]', "app.config": '{"depth":2}', "user.email": "ada@example.com" });
    expect(row.attr_int).toEqual({ "gen_ai.request.max_tokens": 512 });
    expect(row.attr_float).toEqual({ "gen_ai.request.temperature": 0.2 });
    expect(row.attr_bool).toEqual({ "app.flag": false });
    expect(row.model).toBe("gpt-4o");
  });
});

describe("GenAI semantic conventions ≥1.37", () => {
  const input = [{ role: "user", parts: [{ type: "text", content: "Where is my order 123?" }] }];
  const output = [
    {
      role: "assistant",
      parts: [
        { type: "text", content: "Let me check." },
        { type: "tool_call", id: "call_1", name: "lookup_order", arguments: { id: 123 } },
      ],
      finish_reason: "tool_call",
    },
  ];
  const chat = {
    "gen_ai.operation.name": "chat",
    "gen_ai.provider.name": "openai",
    "gen_ai.request.model": "gpt-4.1",
    "gen_ai.response.model": "gpt-4.1-2025-04-14",
    "gen_ai.response.id": "chatcmpl-9",
    "gen_ai.response.finish_reasons": ["tool_calls"],
    "gen_ai.usage.input_tokens": 1000,
    "gen_ai.usage.output_tokens": 300,
    "gen_ai.usage.cache_read.input_tokens": 200,
    "gen_ai.usage.cache_creation.input_tokens": 50,
    "gen_ai.usage.reasoning_tokens": 100,
    "gen_ai.system_instructions": JSON.stringify([{ type: "text", content: "Be brief." }]),
    "gen_ai.input.messages": JSON.stringify(input),
    "gen_ai.output.messages": JSON.stringify(output),
    "gen_ai.tool.definitions": JSON.stringify([{ type: "function", function: { name: "lookup_order", description: "Finds an order", parameters: { type: "object" } } }]),
    "gen_ai.conversation.id": "conv-7",
    "gen_ai.request.user": "user-9",
    "gen_ai.memory.store.id": "store-1",
    "gen_ai.memory.record.id": "record-2",
  };

  test("columns", () => {
    const row = map(chat);
    expect(row).toMatchObject({
      operation: "chat",
      provider: "openai",
      model: "gpt-4.1",
      response_model: "gpt-4.1-2025-04-14",
      response_id: "chatcmpl-9",
      finish_reasons: ["tool_calls"],
      session_id: "conv-7",
      user_id: "user-9",
      memory_store_id: "store-1",
      memory_record_id: "record-2",
      defined_tools: ["lookup_order"],
      tool_call_id: "",
      tool_name: "",
    });
    expect(JSON.parse(row.system_instructions)).toEqual([{ type: "text", content: "Be brief." }]);
    expect(JSON.parse(row.input_messages)).toEqual(input);
    expect(JSON.parse(row.output_messages)).toEqual(output);
    expect(JSON.parse(row.tool_definitions)).toEqual([{ name: "lookup_order", description: "Finds an order", parameters: { type: "object" } }]);
    expect(row.message_text).toBe("Where is my order 123?\nLet me check.");
    // As sent, but the messages, system instructions and tool definitions, which their columns hold whole.
    expect(row.attr_string).toEqual({
      "gen_ai.conversation.id": "conv-7",
      "gen_ai.memory.record.id": "record-2",
      "gen_ai.memory.store.id": "store-1",
      "gen_ai.operation.name": "chat",
      "gen_ai.provider.name": "openai",
      "gen_ai.request.model": "gpt-4.1",
      "gen_ai.request.user": "user-9",
      "gen_ai.response.finish_reasons": '["tool_calls"]',
      "gen_ai.response.id": "chatcmpl-9",
      "gen_ai.response.model": "gpt-4.1-2025-04-14",
    });
    expect(Object.keys(row.attr_string).some((key) => /messages|instructions|definitions/.test(key))).toBe(false);
  });

  test("tokens are additive: input without cache, output without reasoning", () => {
    const row = map(chat);
    expect([row.tokens_input, row.tokens_output, row.tokens_cache_read, row.tokens_cache_create, row.tokens_reasoning]).toEqual([750, 200, 200, 50, 100]);
  });

  test("deprecated usage names (prompt_tokens, cache_read_input_tokens) count the same way", () => {
    const row = map({ "gen_ai.usage.prompt_tokens": 900, "gen_ai.usage.completion_tokens": 40, "gen_ai.usage.cache_read_input_tokens": 100, "gen_ai.usage.cache_creation_input_tokens": 20 });
    expect([row.tokens_input, row.tokens_output, row.tokens_cache_read, row.tokens_cache_create]).toEqual([780, 40, 100, 20]);
  });

  test("Anthropic reports input apart from cache: nothing subtracted", () => {
    const row = map({ "gen_ai.provider.name": "anthropic", "gen_ai.usage.input_tokens": 1000, "gen_ai.usage.cache_read.input_tokens": 200, "gen_ai.usage.output_tokens": 10 });
    expect([row.tokens_input, row.tokens_cache_read]).toEqual([1000, 200]);
  });

  test("a cache larger than the input means the sender was additive", () => {
    const row = map({ "gen_ai.provider.name": "aws.bedrock", "gen_ai.usage.input_tokens": 4299, "gen_ai.usage.cache_read_input_tokens": 35574 });
    expect([row.tokens_input, row.tokens_cache_read]).toEqual([4299, 35574]);
    expect(row.provider).toBe("amazon-bedrock");
  });

  test("messages sent as structured AnyValues", () => {
    const row = map({ "gen_ai.input.messages": input as AttributeValue, "gen_ai.system_instructions": "You are terse." });
    expect(JSON.parse(row.input_messages)).toEqual(input);
    expect(JSON.parse(row.system_instructions)).toEqual([{ type: "text", content: "You are terse." }]);
  });

  test("canonical GenAI JSON is stored as sent; other shapes are normalized", () => {
    const sent = JSON.stringify(input, null, 2);
    expect(map({ "gen_ai.input.messages": sent }).input_messages).toBe(sent);
    const openAiShape = JSON.stringify([{ role: "user", content: "hi" }]);
    expect(JSON.parse(map({ "gen_ai.input.messages": openAiShape }).input_messages)).toEqual([{ role: "user", parts: [{ type: "text", content: "hi" }] }]);
  });

  test("finish reasons fall back to the output messages", () => {
    const { "gen_ai.response.finish_reasons": _, ...withoutReasons } = chat;
    expect(map(withoutReasons).finish_reasons).toEqual(["tool_call"]);
  });

  test("execute_tool spans carry the tool call", () => {
    const row = map({
      "gen_ai.operation.name": "execute_tool",
      "gen_ai.tool.call.id": "call_1",
      "gen_ai.tool.name": "lookup_order",
      "gen_ai.tool.call.arguments": { id: 123 },
      "gen_ai.tool.call.result": '{"status":"shipped"}',
    });
    expect(row).toMatchObject({ operation: "execute_tool", tool_call_id: "call_1", tool_name: "lookup_order", tool_input: '{"id":123}', tool_output: '{"status":"shipped"}' });
    // The arguments and the result are in tool_input and tool_output, whole.
    expect(row.attr_string).toEqual({ "gen_ai.operation.name": "execute_tool", "gen_ai.tool.call.id": "call_1", "gen_ai.tool.name": "lookup_order" });
  });

  test("tool attributes on other spans stay attributes", () => {
    const row = map({ "gen_ai.operation.name": "chat", "gen_ai.tool.name": "lookup_order", "gen_ai.tool.call.id": "call_1" });
    expect([row.tool_name, row.tool_call_id]).toEqual(["", ""]);
    expect(row.attr_string).toEqual({ "gen_ai.operation.name": "chat", "gen_ai.tool.name": "lookup_order", "gen_ai.tool.call.id": "call_1" });
  });

  test("error type from error.type, else the exception event of an error span", () => {
    expect(map({ "error.type": "RateLimitError" }).error_type).toBe("RateLimitError");
    const events = [event("exception", "1763000000000000001", { "exception.type": "TimeoutError" })];
    expect(map({}, { statusCode: "error", events }).error_type).toBe("TimeoutError");
    expect(map({}, { events }).error_type).toBe("");
  });

  test("custom operation names are kept", () => {
    expect(map({ "gen_ai.operation.name": "transcribe" }).operation).toBe("transcribe");
  });
});

describe("time to first token and streaming", () => {
  test("gen_ai.server.time_to_first_token is in seconds", () => {
    const row = map({ "gen_ai.server.time_to_first_token": 0.25 });
    expect(row.time_to_first_token_ns).toBe(250_000_000);
    expect(row.is_streaming).toBe(true);
  });

  test("llm.latency.time_to_first_token and ttft_ms", () => {
    expect(map({ "llm.latency.time_to_first_token": 1.5 }).time_to_first_token_ns).toBe(1_500_000_000);
    expect(map({ ttft_ms: 120 }).time_to_first_token_ns).toBe(120_000_000);
  });

  test("values too large to be seconds are read as milliseconds, then nanoseconds", () => {
    expect(map({ "gen_ai.server.time_to_first_token": 1500 }).time_to_first_token_ns).toBe(1_500_000_000);
    expect(map({ "gen_ai.server.time_to_first_token": 180_000_000 }).time_to_first_token_ns).toBe(180_000_000);
  });

  test("the same keys on events, and the Vercel first-chunk event", () => {
    expect(map({}, { events: [event("llm.first_token", "1", { "gen_ai.server.time_to_first_token": 0.5 })] }).time_to_first_token_ns).toBe(500_000_000);
    expect(map({}, { events: [event("ai.stream.firstChunk", "1", { "ai.response.msToFirstChunk": 321.5 })] }).time_to_first_token_ns).toBe(321_500_000);
  });

  test("first completion event minus span start", () => {
    for (const name of ["gen_ai.content.completion", "gen_ai.choice", "ai.stream.firstChunk"]) {
      const events = [event("other", "1763000000000000005"), event(name, "1763000000400000000"), event(name, "1763000000900000000")];
      expect(map({}, { events }).time_to_first_token_ns).toBe(400_000_000);
    }
  });

  test("no first token: zero and not streaming; the stream flags alone mark streaming", () => {
    const plain = map({});
    expect([plain.time_to_first_token_ns, plain.is_streaming]).toEqual([0, false]);
    expect(map({ "gen_ai.request.stream": true }).is_streaming).toBe(true);
    expect(map({ "ai.settings.mode": "stream" }).is_streaming).toBe(true);
  });
});

describe("OpenInference", () => {
  const llm = {
    "openinference.span.kind": "LLM",
    "llm.system": "anthropic",
    "llm.provider": "aws",
    "llm.model_name": "claude-3-5-sonnet-20241022",
    "llm.token_count.prompt": 1000,
    "llm.token_count.completion": 300,
    "llm.token_count.prompt_details.cache_read": 200,
    "llm.token_count.prompt_details.cache_write": 100,
    "llm.token_count.completion_details.reasoning": 50,
    "llm.input_messages.0.message.role": "system",
    "llm.input_messages.0.message.content": "Be kind.",
    "llm.input_messages.1.message.role": "user",
    "llm.input_messages.1.message.contents.0.message_content.type": "text",
    "llm.input_messages.1.message.contents.0.message_content.text": "What is this?",
    "llm.input_messages.1.message.contents.1.message_content.type": "image",
    "llm.input_messages.1.message.contents.1.message_content.image.image.url": "https://example.com/cat.png",
    "llm.input_messages.2.message.role": "assistant",
    "llm.input_messages.2.message.tool_calls.0.tool_call.id": "call_1",
    "llm.input_messages.2.message.tool_calls.0.tool_call.function.name": "classify",
    "llm.input_messages.2.message.tool_calls.0.tool_call.function.arguments": '{"kind":"animal"}',
    "llm.input_messages.3.message.role": "tool",
    "llm.input_messages.3.message.tool_call_id": "call_1",
    "llm.input_messages.3.message.content": "cat",
    "llm.output_messages.0.message.role": "assistant",
    "llm.output_messages.0.message.content": "A cat.",
    "llm.tools.0.tool.json_schema": JSON.stringify({ type: "function", function: { name: "classify", description: "Classifies", parameters: { type: "object" } } }),
    "session.id": "s-1",
    "user.id": "u-1",
    metadata: JSON.stringify({ tier: "gold", attempt: 2 }),
    "tag.tags": ["beta", "vip"],
    "input.value": '{"messages": []}',
  };

  test("LLM span columns", () => {
    const row = map(llm);
    expect(row).toMatchObject({
      operation: "chat",
      provider: "anthropic",
      model: "claude-3-5-sonnet-20241022",
      response_model: "claude-3-5-sonnet-20241022",
      session_id: "s-1",
      user_id: "u-1",
      tags: ["beta", "vip"],
      metadata: { tier: "gold", attempt: "2" },
      defined_tools: ["classify"],
    });
    expect(row.attr_string).toEqual({
      "openinference.span.kind": "LLM",
      "llm.provider": "aws",
      "llm.system": "anthropic",
      "llm.model_name": "claude-3-5-sonnet-20241022",
      "input.value": '{"messages": []}',
      metadata: '{"tier":"gold","attempt":2}',
      "session.id": "s-1",
      "tag.tags": '["beta","vip"]',
      "user.id": "u-1",
    });
  });

  test("the prompt count includes cache even from Anthropic", () => {
    const row = map(llm);
    expect([row.tokens_input, row.tokens_output, row.tokens_cache_read, row.tokens_cache_create, row.tokens_reasoning]).toEqual([700, 250, 200, 100, 50]);
  });

  test("flattened messages become GenAI messages", () => {
    const row = map(llm);
    // Leading system messages are the system instructions, whatever the source.
    expect(JSON.parse(row.system_instructions)).toEqual([{ type: "text", content: "Be kind." }]);
    expect(JSON.parse(row.input_messages)).toEqual([
      { role: "user", parts: [{ type: "text", content: "What is this?" }, { type: "uri", modality: "image", uri: "https://example.com/cat.png" }] },
      { role: "assistant", parts: [{ type: "tool_call", id: "call_1", name: "classify", arguments: { kind: "animal" } }] },
      { role: "tool", parts: [{ type: "tool_call_response", id: "call_1", response: "cat" }] },
    ]);
    expect(JSON.parse(row.output_messages)).toEqual([{ role: "assistant", parts: [{ type: "text", content: "A cat." }] }]);
    expect(row.message_text).toBe("What is this?\nA cat.");
  });

  test("span kinds map to operations", () => {
    const kinds: Record<string, string> = { EMBEDDING: "embeddings", TOOL: "execute_tool", AGENT: "invoke_agent", CHAIN: "invoke_workflow", RETRIEVER: "retrieval", RERANKER: "rerank", PROMPT_TEMPLATE: "prompt_template" };
    for (const [kind, operation] of Object.entries(kinds)) expect(map({ "openinference.span.kind": kind }).operation).toBe(operation);
  });

  test("TOOL spans: tool.name, input.value, output.value", () => {
    const row = map({ "openinference.span.kind": "TOOL", "tool.name": "search", "input.value": '{"q":"cats"}', "output.value": "3 results" });
    expect(row).toMatchObject({ operation: "execute_tool", tool_name: "search", tool_input: '{"q":"cats"}', tool_output: "3 results" });
  });

  test("embedding model name", () => {
    expect(map({ "openinference.span.kind": "EMBEDDING", "embedding.model_name": "text-embedding-3-small" }).model).toBe("text-embedding-3-small");
  });
});

describe("Vercel AI SDK", () => {
  const doGenerate = {
    "ai.operationId": "ai.generateText.doGenerate",
    "operation.name": "ai.generateText.doGenerate support",
    "ai.model.provider": "openai.chat",
    "ai.model.id": "gpt-4o-mini",
    "ai.response.model": "gpt-4o-mini-2024-07-18",
    "ai.response.id": "resp_1",
    "ai.usage.inputTokens": 1000,
    "ai.usage.outputTokens": 120,
    "ai.usage.cachedInputTokens": 400,
    "ai.usage.reasoningTokens": 20,
    "ai.response.finishReason": "tool-calls",
    "ai.telemetry.metadata.threadId": "thread-5",
    "ai.prompt.messages": JSON.stringify([
      { role: "system", content: "You help." },
      {
        role: "user",
        content: [
          { type: "text", text: "Weather in Paris?" },
          { type: "image", image: "https://example.com/paris.jpg", mediaType: "image/jpeg" },
        ],
      },
      { role: "assistant", content: [{ type: "tool-call", toolCallId: "c1", toolName: "weather", input: { city: "Paris" } }] },
      { role: "tool", content: [{ type: "tool-result", toolCallId: "c1", toolName: "weather", output: { type: "json", value: { celsius: 21 } } }] },
    ]),
    "ai.prompt.tools": [JSON.stringify({ type: "function", name: "weather", description: "Current weather", inputSchema: { type: "object" } })],
    "ai.response.text": "It is 21°C.",
    "ai.response.toolCalls": JSON.stringify([{ toolCallType: "function", toolCallId: "c2", toolName: "forecast", args: '{"days":3}' }]),
  };

  test("doGenerate: the LLM call", () => {
    const row = map(doGenerate);
    expect(row).toMatchObject({
      operation: "chat",
      provider: "openai",
      model: "gpt-4o-mini",
      response_model: "gpt-4o-mini-2024-07-18",
      response_id: "resp_1",
      finish_reasons: ["tool-calls"],
      session_id: "thread-5",
      is_usage_wrapper: false,
      defined_tools: ["weather"],
    });
    expect([row.tokens_input, row.tokens_output, row.tokens_cache_read, row.tokens_reasoning]).toEqual([600, 100, 400, 20]);
    expect(JSON.parse(row.system_instructions)).toEqual([{ type: "text", content: "You help." }]);
    expect(JSON.parse(row.input_messages)).toEqual([
      { role: "user", parts: [{ type: "text", content: "Weather in Paris?" }, { type: "uri", modality: "image", mime_type: "image/jpeg", uri: "https://example.com/paris.jpg" }] },
      { role: "assistant", parts: [{ type: "tool_call", id: "c1", name: "weather", arguments: { city: "Paris" } }] },
      { role: "tool", parts: [{ type: "tool_call_response", id: "c1", response: { celsius: 21 } }] },
    ]);
    expect(JSON.parse(row.output_messages)).toEqual([
      {
        role: "assistant",
        parts: [
          { type: "text", content: "It is 21°C." },
          { type: "tool_call", id: "c2", name: "forecast", arguments: { days: 3 } },
        ],
        finish_reason: "tool-calls",
      },
    ]);
    expect(JSON.parse(row.tool_definitions)).toEqual([{ name: "weather", description: "Current weather", parameters: { type: "object" } }]);
    expect(row.attr_string).toEqual({
      "ai.model.id": "gpt-4o-mini",
      "ai.model.provider": "openai.chat",
      "ai.operationId": "ai.generateText.doGenerate",
      "ai.response.finishReason": "tool-calls",
      "ai.response.id": "resp_1",
      "ai.response.model": "gpt-4o-mini-2024-07-18",
      "ai.telemetry.metadata.threadId": "thread-5",
      "operation.name": "ai.generateText.doGenerate support",
    });
  });

  test("doStream: milliseconds to first chunk", () => {
    const row = map({ "ai.operationId": "ai.streamText.doStream", "ai.response.msToFirstChunk": 420.5 });
    expect(row).toMatchObject({ operation: "chat", time_to_first_token_ns: 420_500_000, is_streaming: true, is_usage_wrapper: false });
  });

  test("wrapper spans repeat their children's usage: chat operations flagged as usage wrappers", () => {
    for (const operationId of ["ai.generateText", "ai.streamText", "ai.generateObject", "ai.streamObject"]) {
      const row = map({ "ai.operationId": operationId, "ai.model.provider": "openai.chat", "ai.model.id": "gpt-4o", "ai.usage.promptTokens": 10, "ai.usage.completionTokens": 5 });
      expect(row.is_usage_wrapper).toBe(true);
      expect(row.operation).toBe("chat");
      expect([row.tokens_input, row.tokens_output]).toEqual([10, 5]);
    }
    // gen_ai.operation.name wins over the operation id; the span still only repeats its children's usage.
    expect(map({ "ai.operationId": "ai.generateText", "gen_ai.operation.name": "invoke_agent" })).toMatchObject({ operation: "invoke_agent", is_usage_wrapper: true });
    expect(map({ "ai.operationId": "ai.embed", "ai.usage.tokens": 8 })).toMatchObject({ is_usage_wrapper: true, operation: "embeddings", tokens_input: 8 });
    expect(map({ "ai.operationId": "ai.embed.doEmbed" })).toMatchObject({ is_usage_wrapper: false, operation: "embeddings" });
  });

  test("wrapper prompt: system, prompt and response text", () => {
    const row = map({ "ai.operationId": "ai.generateText", "ai.prompt": JSON.stringify({ system: "Be brief.", prompt: "Hi!" }), "ai.response.text": "Hello." });
    expect(JSON.parse(row.system_instructions)).toEqual([{ type: "text", content: "Be brief." }]);
    expect(JSON.parse(row.input_messages)).toEqual([{ role: "user", parts: [{ type: "text", content: "Hi!" }] }]);
    expect(JSON.parse(row.output_messages)).toEqual([{ role: "assistant", parts: [{ type: "text", content: "Hello." }] }]);
  });

  test("tool calls", () => {
    const row = map({ "ai.operationId": "ai.toolCall", "ai.toolCall.id": "c1", "ai.toolCall.name": "weather", "ai.toolCall.args": '{"city":"Paris"}', "ai.toolCall.result": '{"celsius":21}' });
    expect(row).toMatchObject({ operation: "execute_tool", tool_call_id: "c1", tool_name: "weather", tool_input: '{"city":"Paris"}', tool_output: '{"celsius":21}' });
  });

  test("Anthropic through AI SDK 5 is additive; AI SDK 6 reports totals and the additive counts", () => {
    const v5 = map({ "ai.model.provider": "anthropic.messages", "ai.usage.inputTokens": 100, "ai.usage.cachedInputTokens": 900 });
    expect([v5.provider, v5.tokens_input, v5.tokens_cache_read]).toEqual(["anthropic", 100, 900]);
    const v6 = map({
      "ai.model.provider": "anthropic.messages",
      "ai.usage.inputTokens": 1100,
      "ai.usage.inputTokenDetails.noCacheTokens": 150,
      "ai.usage.inputTokenDetails.cacheReadTokens": 900,
      "ai.usage.inputTokenDetails.cacheWriteTokens": 50,
      "ai.usage.outputTokens": 300,
      "ai.usage.outputTokenDetails.textTokens": 260,
      "ai.usage.outputTokenDetails.reasoningTokens": 40,
    });
    expect([v6.tokens_input, v6.tokens_cache_read, v6.tokens_cache_create, v6.tokens_output, v6.tokens_reasoning]).toEqual([150, 900, 50, 260, 40]);
  });
});

describe("Traceloop / OpenLLMetry (deprecated gen_ai.prompt.N.*)", () => {
  const span = {
    "gen_ai.system": "Anthropic",
    "llm.request.type": "chat",
    "gen_ai.request.model": "claude-3-5-haiku-20241022",
    "gen_ai.usage.prompt_tokens": 50,
    "gen_ai.usage.completion_tokens": 20,
    "gen_ai.prompt.0.role": "user",
    "gen_ai.prompt.0.content": JSON.stringify([{ type: "text", text: "Translate: bonjour" }]),
    "gen_ai.prompt.1.role": "assistant",
    "gen_ai.prompt.1.tool_calls.0.id": "t1",
    "gen_ai.prompt.1.tool_calls.0.name": "translate",
    "gen_ai.prompt.1.tool_calls.0.arguments": '{"word":"bonjour"}',
    "gen_ai.prompt.2.role": "tool",
    "gen_ai.prompt.2.tool_call_id": "t1",
    "gen_ai.prompt.2.content": "hello",
    "gen_ai.completion.0.role": "assistant",
    "gen_ai.completion.0.content": "Hello.",
    "gen_ai.completion.0.finish_reason": "end_turn",
    "llm.request.functions.0.name": "translate",
    "llm.request.functions.0.description": "Translates a word",
    "llm.request.functions.0.parameters": '{"type":"object"}',
    "traceloop.association.properties.session_id": "sess-3",
    "traceloop.association.properties.user_id": "user-3",
    "traceloop.association.properties.plan": "pro",
  };

  test("columns and messages", () => {
    const row = map(span);
    expect(row).toMatchObject({
      operation: "chat",
      provider: "anthropic",
      model: "claude-3-5-haiku-20241022",
      tokens_input: 50,
      tokens_output: 20,
      finish_reasons: ["end_turn"],
      session_id: "sess-3",
      user_id: "user-3",
      metadata: { session_id: "sess-3", user_id: "user-3", plan: "pro" },
      defined_tools: ["translate"],
    });
    expect(JSON.parse(row.input_messages)).toEqual([
      { role: "user", parts: [{ type: "text", content: "Translate: bonjour" }] },
      { role: "assistant", parts: [{ type: "tool_call", id: "t1", name: "translate", arguments: { word: "bonjour" } }] },
      { role: "tool", parts: [{ type: "tool_call_response", id: "t1", response: "hello" }] },
    ]);
    expect(JSON.parse(row.output_messages)).toEqual([{ role: "assistant", parts: [{ type: "text", content: "Hello." }], finish_reason: "end_turn" }]);
    expect(JSON.parse(row.tool_definitions)).toEqual([{ name: "translate", description: "Translates a word", parameters: { type: "object" } }]);
    expect(row.attr_string).toEqual({
      "gen_ai.request.model": "claude-3-5-haiku-20241022",
      "gen_ai.system": "Anthropic",
      "llm.request.type": "chat",
      "traceloop.association.properties.plan": "pro",
      "traceloop.association.properties.session_id": "sess-3",
      "traceloop.association.properties.user_id": "user-3",
    });
  });

  test("request types map to operations", () => {
    expect(map({ "llm.request.type": "completion" }).operation).toBe("text_completion");
    expect(map({ "llm.request.type": "embedding" }).operation).toBe("embeddings");
  });

  test("GenAI messages win over the deprecated ones", () => {
    const row = map({ ...span, "gen_ai.input.messages": JSON.stringify([{ role: "user", parts: [{ type: "text", content: "new" }] }]) });
    expect(JSON.parse(row.input_messages)[0].parts[0].content).toBe("new");
    expect(row.attr_string["gen_ai.prompt.0.role"]).toBe("user");
  });
});

describe("Langfuse and LangSmith", () => {
  test("Langfuse session, user, tags, metadata, observation type", () => {
    const row = map({
      "langfuse.session.id": "lf-session",
      "langfuse.user.id": "lf-user",
      "langfuse.trace.tags": ["a", "b"],
      "langfuse.trace.metadata.team": "search",
      "langfuse.observation.metadata.step": 3,
      "langfuse.observation.type": "generation",
    });
    expect(row).toMatchObject({ session_id: "lf-session", user_id: "lf-user", tags: ["a", "b"], metadata: { team: "search", step: "3" }, operation: "chat" });
  });

  test("LangSmith session, user, comma-separated tags, metadata, run type", () => {
    const row = map({
      "langsmith.trace.session_id": "ls-session",
      "langsmith.metadata.user_id": "ls-user",
      "langsmith.metadata.region": "eu",
      "langsmith.span.tags": "alpha, beta ,alpha,",
      "langsmith.span.kind": "tool",
      "tool.name": "calculator",
    });
    expect(row).toMatchObject({
      session_id: "ls-session",
      user_id: "ls-user",
      tags: ["alpha", "beta"],
      metadata: { user_id: "ls-user", region: "eu" },
      operation: "execute_tool",
      tool_name: "calculator",
    });
  });
});

describe("@latitude-data/telemetry attributes", () => {
  test("tags, metadata, session, user, simulation, retention", () => {
    const row = map({
      "latitude.capture.name": "support-chat",
      "latitude.tags": JSON.stringify(["prod", "vip", "prod"]),
      "latitude.metadata": JSON.stringify({ release: "1.2", cohort: 7 }),
      "langfuse.trace.metadata.release": "ignored: latitude.metadata comes first",
      "session.id": "lat-session",
      "langfuse.session.id": "loses to session.id",
      "user.id": "lat-user",
      "user.email": "ada@example.com",
      "latitude.project": "my-project",
      "latitude.simulation.id": "sim_123",
      "latitude.retention_days": 30,
    });
    expect(row).toMatchObject({
      tags: ["prod", "vip"],
      metadata: { release: "1.2", cohort: "7" },
      session_id: "lat-session",
      user_id: "lat-user",
      simulation_id: "sim_123",
      retention_days: 30,
    });
    expect(row.attr_string).toEqual({
      "latitude.capture.name": "support-chat",
      "langfuse.session.id": "loses to session.id",
      "langfuse.trace.metadata.release": "ignored: latitude.metadata comes first",
      "latitude.metadata": '{"release":"1.2","cohort":7}',
      "latitude.simulation.id": "sim_123",
      "latitude.tags": '["prod","vip","prod"]',
      "session.id": "lat-session",
      "user.email": "ada@example.com",
      "user.id": "lat-user",
      "latitude.project": "my-project",
    });
  });

  test("retention days outside 1..65535 or not a number fall back to the default", () => {
    expect(map({ "latitude.retention_days": 0 }).retention_days).toBe(0);
    expect(map({ "latitude.retention_days": -5 }).retention_days).toBe(0);
    expect(map({ "latitude.retention_days": "soon" }).retention_days).toBe(0);
    expect(map({ "latitude.retention_days": 1e9 }).retention_days).toBe(65535);
    expect(map({ "latitude.retention_days": "14" }).retention_days).toBe(14);
  });
});

describe("providers", () => {
  test("aliases and Vercel suffixes", () => {
    const cases: Record<string, string> = {
      "openai.responses": "openai",
      "anthropic.messages": "anthropic",
      "google.generative-ai": "google",
      "google.vertex.chat": "google-vertex",
      "mistral.chat": "mistral",
      "openai.embedding": "openai",
      bedrock: "amazon-bedrock",
      "aws.bedrock": "amazon-bedrock",
      gemini: "google",
      "gcp.gemini": "google",
      vertex_ai: "google-vertex",
      mistralai: "mistral",
      "mistral_ai": "mistral",
      x_ai: "xai",
      "azure.ai.openai": "azure",
      OpenAI: "openai",
      groq: "groq",
    };
    for (const [sent, stored] of Object.entries(cases)) expect(normalizeProvider(sent)).toBe(stored);
  });

  test("resolution order: gen_ai.provider.name, gen_ai.system, llm.system, ai.model.provider", () => {
    expect(map({ "gen_ai.system": "openai", "gen_ai.provider.name": "azure.ai.openai" }).provider).toBe("azure");
    expect(map({ "llm.system": "mistralai", "ai.model.provider": "openai.chat" }).provider).toBe("mistral");
    expect(map({ model: "my-model" }).model).toBe("my-model");
  });
});

describe("real exporter encodings end to end", () => {
  test("SDK spans with Latitude and GenAI attributes map the same from protobuf and JSON", () => {
    const exporter = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ resource: resourceFromAttributes({ "service.name": "billing-bot" }), spanProcessors: [new SimpleSpanProcessor(exporter)] });
    const span = provider.getTracer("so.latitude.instrumentation.openai").startSpan("openai.response gpt-5", {
      startTime: [1_763_000_000, 0],
      attributes: {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-5",
        "gen_ai.usage.input_tokens": 2000,
        "gen_ai.usage.output_tokens": 500,
        "gen_ai.usage.reasoning_tokens": 300,
        "gen_ai.request.stream": true,
        "gen_ai.input.messages": JSON.stringify([{ role: "user", parts: [{ type: "text", content: "Refund order 7" }] }]),
        "latitude.tags": JSON.stringify(["refunds"]),
        "session.id": "s-77",
      },
    });
    span.end([1_763_000_003, 250]);
    const spans = exporter.getFinishedSpans();
    const fromProtobuf = mapTraces(decodeProtobuf(ProtobufTraceSerializer.serializeRequest(spans)!), owner);
    const fromJson = mapTraces(decodeJson(JsonTraceSerializer.serializeRequest(spans)!), owner);
    expect(fromJson).toEqual(fromProtobuf);
    expect(fromProtobuf).toHaveLength(1);
    expect(fromProtobuf[0]).toMatchObject({
      service_name: "billing-bot",
      scope_name: "so.latitude.instrumentation.openai",
      operation: "chat",
      model: "gpt-5",
      tokens_input: 2000,
      tokens_output: 200,
      tokens_reasoning: 300,
      is_streaming: true,
      tags: ["refunds"],
      session_id: "s-77",
      duration_ns: 3_000_000_250,
      message_text: "Refund order 7",
    });
  });
});

describe("nanosBetween", () => {
  test("exact across second boundaries, for short times and for the largest times", () => {
    expect(nanosBetween("1763000000999999999", "1763000001000000001")).toBe(2);
    expect(nanosBetween("5", "1000000007")).toBe(1_000_000_002);
    expect(nanosBetween("18446744073709551000", "18446744073709551615")).toBe(615);
    expect(nanosBetween("1763000000000000000", "1763000000000000000")).toBe(0);
  });
});

describe("hostile attribute keys", () => {
  test('"__proto__" is stored as a key, never as a prototype', () => {
    const row = mapSpan(
      decodedSpan(JSON.parse('{"__proto__": "span value", "langfuse.trace.metadata.__proto__": "meta"}')),
      mapResource(new Map([["__proto__", "resource value"]])),
      { name: "", version: "" },
      owner,
    );
    for (const map of [row.attr_string, row.metadata, row.resource_string]) expect(Object.getPrototypeOf(map)).toBe(Object.prototype);
    expect(Object.getOwnPropertyDescriptor(row.attr_string, "__proto__")?.value).toBe("span value");
    expect(Object.getOwnPropertyDescriptor(row.metadata, "__proto__")?.value).toBe("meta");
    expect(Object.getOwnPropertyDescriptor(row.resource_string, "__proto__")?.value).toBe("resource value");
  });
});
