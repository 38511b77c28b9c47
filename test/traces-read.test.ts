import { beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import type { LatitudeClient } from "@latitude-data/sdk";
import type { Vigil } from "../src/server";
import { epochNanos, insertSpans, newTraceId, spanRow, tenantOf, textMessages, type Tenant } from "./fixtures/spans";
import { bootstrapAccount, sharedVigil } from "./helpers";
import { sdkFailure } from "./sdk";

setDefaultTimeout(60_000);

let vigil: Vigil;
let client: LatitudeClient;
let slug: string;
let tenant: Tenant;

const hour = 3600_000;
// Noon UTC two days ago: the analytics buckets of this test are known.
const noon = Math.floor(Date.now() / (24 * hour)) * 24 * hour - 2 * 24 * hour + 12 * hour;
const traceId = newTraceId();
const ids = { root: "1000000000000001", firstChat: "1000000000000002", tool: "1000000000000003", lastChat: "1000000000000004" };

beforeAll(async () => {
  vigil = await sharedVigil();
  const created = await bootstrapAccount(vigil.url, { projectName: "Trace reading" });
  client = created.client;
  slug = created.account.projectSlug;
  tenant = await tenantOf(vigil.ctx, created.account.apiKey, slug);
  const system = JSON.stringify([{ type: "text", content: "You are a support agent." }]);
  await insertSpans(vigil.ctx, [
    spanRow(tenant, {
      trace_id: traceId,
      span_id: ids.root,
      name: "support-turn",
      kind: "server",
      status_code: "ok",
      startMs: noon + 1000,
      durationMs: 5000,
      session_id: "session-read",
      user_id: "user-7",
      tags: ["prod"],
      metadata: { env: "prod", tier: "gold" },
      api_key_id: "key0000000000000000000000",
      scope_name: "@latitude-data/telemetry",
      scope_version: "3.6.0",
      resource_string: { "service.name": "agent", "host.name": "box-1" },
      retention_days: 30,
    }),
    spanRow(tenant, {
      trace_id: traceId,
      span_id: ids.firstChat,
      parent_span_id: ids.root,
      name: "chat one",
      kind: "client",
      operation: "chat",
      provider: "openai",
      model: "gpt-4o",
      startMs: noon + 1100,
      durationMs: 900,
      tokens_input: 100,
      tokens_output: 10,
      cost_total_microcents: 150_000_000,
      time_to_first_token_ns: 300_000_000,
      metadata: { tier: "silver", turn: "1" },
      system_instructions: system,
      input_messages: textMessages(["user", "Where is my parcel?"]),
      output_messages: textMessages(["assistant", "Let me check."]),
    }),
    spanRow(tenant, {
      trace_id: traceId,
      span_id: ids.tool,
      parent_span_id: ids.root,
      name: "lookup_order",
      operation: "execute_tool",
      status_code: "error",
      status_message: "order service timed out",
      error_type: "TimeoutError",
      startMs: noon + 2100,
      durationMs: 400,
      tool_call_id: "call_1",
      tool_name: "lookup_order",
      tool_input: '{"orderId":"A-1"}',
      tool_output: "",
      events_json: JSON.stringify([{ name: "exception", timeUnixNano: epochNanos(noon + 2400), attributes: { "exception.type": "TimeoutError" } }]),
    }),
    spanRow(tenant, {
      trace_id: traceId,
      span_id: ids.lastChat,
      parent_span_id: ids.root,
      name: "chat two",
      kind: "client",
      operation: "chat",
      provider: "openai",
      model: "gpt-4o",
      response_model: "gpt-4o-2024-08-06",
      response_id: "chatcmpl-2",
      finish_reasons: ["stop"],
      startMs: noon + 2600,
      durationMs: 3000,
      tokens_input: 200,
      tokens_output: 40,
      tokens_cache_read: 50,
      tokens_reasoning: 5,
      cost_input_microcents: 100_000_000,
      cost_output_microcents: 50_000_000,
      cost_total_microcents: 150_000_000,
      cost_is_estimated: true,
      time_to_first_token_ns: 500_000_000,
      is_streaming: true,
      system_instructions: system,
      input_messages: textMessages(["user", "Where is my parcel?"], ["assistant", "Let me check."], ["user", "Any news?"]),
      output_messages: textMessages(["assistant", "It ships tomorrow."]),
      tool_definitions: JSON.stringify([
        { name: "lookup_order", description: "Find an order", parameters: { type: "object", properties: { orderId: { type: "string" } } } },
        { type: "function", function: { name: "refund", parameters: null } },
      ]),
      defined_tools: ["lookup_order", "refund"],
      attr_string: { "gen_ai.request.temperature_label": "low" },
      attr_int: { "gen_ai.request.max_tokens": 512 },
      attr_float: { "gen_ai.request.temperature": 0.2 },
      attr_bool: { "gen_ai.request.stream": true },
      links_json: JSON.stringify([{ traceId: "a".repeat(32), spanId: "b".repeat(16) }]),
    }),
    // A second trace 14 hours later, in another bucket.
    spanRow(tenant, { trace_id: newTraceId(), name: "later", startMs: noon + 14 * hour, durationMs: 1000, operation: "chat", tokens_input: 7, time_to_first_token_ns: 100_000_000 }),
  ]);
});

const nanosIso = (ms: number) => new Date(ms).toISOString().replace("Z", "000000Z");

describe("trace detail", () => {
  test("every Trace field plus metadata and the conversation of the last LLM-completion span", async () => {
    const detail = await client.traces.get(slug, traceId);
    expect(detail).toEqual({
      organizationId: tenant.organizationId,
      projectId: tenant.projectId,
      traceId,
      spanCount: 4,
      errorCount: 1,
      startTime: nanosIso(noon + 1000),
      endTime: nanosIso(noon + 6000),
      durationNs: 5_000_000_000,
      // From the trace's start: the first chat starts 100 ms in and measured its first token 300 ms later.
      timeToFirstTokenNs: 400_000_000,
      tokensInput: 300,
      tokensOutput: 50,
      tokensCacheRead: 50,
      tokensCacheCreate: 0,
      tokensReasoning: 5,
      tokensTotal: 405,
      costInputMicrocents: 100_000_000,
      costOutputMicrocents: 50_000_000,
      costTotalMicrocents: 300_000_000,
      sessionId: "session-read",
      userId: "user-7",
      simulationId: null,
      tags: ["prod"],
      models: ["gpt-4o"],
      providers: ["openai"],
      serviceNames: ["agent"],
      rootSpanId: ids.root,
      rootSpanName: "support-turn",
      positiveAnnotationCount: 0,
      negativeAnnotationCount: 0,
      metadata: { env: "prod", tier: "gold", turn: "1" },
      conversation: [
        { role: "system", parts: [{ type: "text", content: "You are a support agent." }] },
        { role: "user", parts: [{ type: "text", content: "Where is my parcel?" }] },
        { role: "assistant", parts: [{ type: "text", content: "Let me check." }] },
        { role: "user", parts: [{ type: "text", content: "Any news?" }] },
        { role: "assistant", parts: [{ type: "text", content: "It ships tomorrow." }] },
      ],
    });
  });

  test("annotation counts come from published annotations", async () => {
    const other = await bootstrapAccount(vigil.url);
    const otherTenant = await tenantOf(vigil.ctx, other.account.apiKey, other.account.projectSlug);
    const annotated = newTraceId();
    await insertSpans(vigil.ctx, [spanRow(otherTenant, { trace_id: annotated, startMs: noon, operation: "chat", output_messages: textMessages(["assistant", "ok"]) })]);
    const annotate = (passed: boolean) =>
      other.client.annotations.create(other.account.projectSlug, { value: passed ? 1 : 0, passed, feedback: "noted", trace: { by: "id", id: annotated } } as never);
    await annotate(true);
    await annotate(true);
    await annotate(false);
    const detail = await other.client.traces.get(other.account.projectSlug, annotated);
    expect(detail).toMatchObject({ positiveAnnotationCount: 2, negativeAnnotationCount: 1 });
    const [item] = (await other.client.traces.list(other.account.projectSlug)).items;
    expect(item).toMatchObject({ positiveAnnotationCount: 2, negativeAnnotationCount: 1 });
    // A filtered page reads its items in the page query: the same item, counts included.
    const filtered = await other.client.traces.list(other.account.projectSlug, { filters: { traceId: [{ op: "eq", value: annotated }] } as never });
    expect(filtered.items).toEqual([item]);
  });

  test("an unknown trace is a 404; a malformed id a 400", async () => {
    expect((await sdkFailure(client.traces.get(slug, newTraceId()))).statusCode).toBe(404);
    expect((await sdkFailure(client.traces.get(slug, "short"))).statusCode).toBe(400);
    expect((await sdkFailure(client.traces.get("no-such-project", traceId))).statusCode).toBe(404);
  });
});

describe("spans", () => {
  test("the list is by start time, without message content", async () => {
    const { items } = await client.traces.listSpans(slug, traceId);
    expect(items.map((span) => span.spanId)).toEqual([ids.root, ids.firstChat, ids.tool, ids.lastChat]);
    const root = items[0];
    expect(root).toEqual({
      organizationId: tenant.organizationId,
      projectId: tenant.projectId,
      traceId,
      spanId: ids.root,
      parentSpanId: null,
      sessionId: "session-read",
      userId: "user-7",
      simulationId: null,
      apiKeyId: "key0000000000000000000000",
      startTime: nanosIso(noon + 1000),
      endTime: nanosIso(noon + 6000),
      name: "support-turn",
      serviceName: "agent",
      kind: "server",
      statusCode: "ok",
      statusMessage: "",
      traceFlags: 1,
      traceState: "",
      errorType: null,
      tags: ["prod"],
      operation: "unspecified",
      provider: null,
      model: null,
      responseModel: null,
      tokensInput: 0,
      tokensOutput: 0,
      tokensCacheRead: 0,
      tokensCacheCreate: 0,
      tokensReasoning: 0,
      costInputMicrocents: 0,
      costOutputMicrocents: 0,
      costTotalMicrocents: 0,
      costIsEstimated: false,
      timeToFirstTokenNs: 0,
      isStreaming: false,
      responseId: null,
      finishReasons: [],
      scopeName: "@latitude-data/telemetry",
      scopeVersion: "3.6.0",
      retentionDays: 30,
      ingestedAt: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/),
    });
    expect(items[1]).not.toHaveProperty("retentionDays");
    expect(items[1]).not.toHaveProperty("inputMessages");
    expect(items[2]).toMatchObject({ statusCode: "error", statusMessage: "order service timed out", errorType: "TimeoutError" });
  });

  test("a span's detail has every field", async () => {
    const span = await client.traces.getSpan(slug, traceId, ids.lastChat);
    expect(span).toMatchObject({
      spanId: ids.lastChat,
      parentSpanId: ids.root,
      model: "gpt-4o",
      responseModel: "gpt-4o-2024-08-06",
      responseId: "chatcmpl-2",
      finishReasons: ["stop"],
      costIsEstimated: true,
      isStreaming: true,
      metadata: {},
      systemInstructions: [{ type: "text", content: "You are a support agent." }],
      inputMessages: [
        { role: "user", parts: [{ type: "text", content: "Where is my parcel?" }] },
        { role: "assistant", parts: [{ type: "text", content: "Let me check." }] },
        { role: "user", parts: [{ type: "text", content: "Any news?" }] },
      ],
      outputMessages: [{ role: "assistant", parts: [{ type: "text", content: "It ships tomorrow." }] }],
      toolDefinitions: [
        { name: "lookup_order", description: "Find an order", parameters: { type: "object", properties: { orderId: { type: "string" } } } },
        { name: "refund", description: "", parameters: null },
      ],
      toolCallId: "",
      toolName: "",
      toolInput: "",
      toolOutput: "",
      attrString: { "gen_ai.request.temperature_label": "low" },
      attrInt: { "gen_ai.request.max_tokens": 512 },
      attrFloat: { "gen_ai.request.temperature": 0.2 },
      attrBool: { "gen_ai.request.stream": true },
      resourceString: {},
      eventsJson: "",
      linksJson: JSON.stringify([{ traceId: "a".repeat(32), spanId: "b".repeat(16) }]),
    });
    const tool = await client.traces.getSpan(slug, traceId, ids.tool);
    expect(tool).toMatchObject({ toolCallId: "call_1", toolName: "lookup_order", toolInput: '{"orderId":"A-1"}', toolOutput: "", inputMessages: [], systemInstructions: [], toolDefinitions: [] });
    expect(JSON.parse(tool.eventsJson)).toEqual([{ name: "exception", timeUnixNano: epochNanos(noon + 2400), attributes: { "exception.type": "TimeoutError" } }]);
    const root = await client.traces.getSpan(slug, traceId, ids.root);
    expect(root.resourceString).toEqual({ "service.name": "agent", "host.name": "box-1" });
    expect(root.metadata).toEqual({ env: "prod", tier: "gold" });
  });

  test("unknown spans and traces are 404s", async () => {
    expect((await sdkFailure(client.traces.getSpan(slug, traceId, "ffffffffffffffff"))).statusCode).toBe(404);
    expect((await sdkFailure(client.traces.listSpans(slug, newTraceId()))).statusCode).toBe(404);
  });

  test("another organization's key gets a 404 for a span, through its project or this one", async () => {
    const stranger = await bootstrapAccount(vigil.url);
    expect((await sdkFailure(stranger.client.traces.getSpan(stranger.account.projectSlug, traceId, ids.lastChat))).statusCode).toBe(404);
    expect((await sdkFailure(stranger.client.traces.getSpan(slug, traceId, ids.lastChat))).statusCode).toBe(404);
    const byId = await fetch(`${vigil.url}/v1/organizations/${tenant.organizationId}/projects/${tenant.projectId}/traces/${traceId}/spans/${ids.lastChat}`, {
      headers: { authorization: `Bearer ${stranger.account.apiKey}` },
    });
    expect(byId.status).toBe(404);
  });
});

describe("analytics", () => {
  test("totals, medians and 12-hour UTC buckets over the range", async () => {
    const analytics = await client.traces.analytics(slug, { fromIso: new Date(noon - hour).toISOString(), toIso: new Date(noon + 23 * hour).toISOString() });
    const buckets = [noon - 12 * hour, noon, noon + 12 * hour].map((ms) => new Date(ms).toISOString());
    expect(analytics.traces).toEqual({ total: 2, buckets: [{ bucket: buckets[0], value: 0 }, { bucket: buckets[1], value: 1 }, { bucket: buckets[2], value: 1 }] });
    expect(analytics.spans.total).toBe(5);
    expect(analytics.spans.buckets.map((bucket) => bucket.value)).toEqual([0, 4, 1]);
    expect(analytics.cost.total).toBe(3);
    expect(analytics.cost.buckets.map((bucket) => bucket.value)).toEqual([0, 3, 0]);
    expect(analytics.tokens.total).toBe(412);
    expect(analytics.tokens.buckets.map((bucket) => bucket.value)).toEqual([0, 405, 7]);
    // Trace durations 5 s and 1 s: the exact median of two values is the upper one.
    expect(analytics.duration.median).toBe(5);
    expect(analytics.duration.buckets.map((bucket) => bucket.value)).toEqual([0, 5, 1]);
    // Traces' times to first token 0.4 s and 0.1 s: the exact median of two values is the upper one.
    expect(analytics.timeToFirstToken.median).toBe(0.4);
    expect(analytics.timeToFirstToken.buckets.map((bucket) => bucket.value)).toEqual([0, 0.4, 0.1]);
  });

  // A partition of their own (an earlier month): these inserts leave the merges of this month's parts
  // alone, which traces-sdk.test.ts looks at.
  const past = noon - 40 * 24 * hour;

  test("tokens count LLM spans only", async () => {
    const other = await bootstrapAccount(vigil.url);
    const otherTenant = await tenantOf(vigil.ctx, other.account.apiKey, other.account.projectSlug);
    const trace_id = newTraceId();
    await insertSpans(vigil.ctx, [
      spanRow(otherTenant, { trace_id, span_id: "3000000000000001", name: "agent", operation: "invoke_agent", startMs: past, durationMs: 3000, tokens_input: 1000, tokens_output: 1000 }),
      spanRow(otherTenant, { trace_id, parent_span_id: "3000000000000001", name: "embed", operation: "embeddings", startMs: past + 10, tokens_input: 500 }),
      spanRow(otherTenant, { trace_id, parent_span_id: "3000000000000001", name: "chat", operation: "chat", startMs: past + 100, tokens_input: 30, tokens_output: 12 }),
      spanRow(otherTenant, { trace_id, parent_span_id: "3000000000000001", name: "complete", operation: "text_completion", startMs: past + 200, tokens_output: 7, tokens_reasoning: 1 }),
      spanRow(otherTenant, { trace_id, parent_span_id: "3000000000000001", name: "generate", operation: "generate_content", startMs: past + 300, tokens_cache_read: 50 }),
    ]);
    const analytics = await other.client.traces.analytics(other.account.projectSlug, { fromIso: new Date(past - hour).toISOString(), toIso: new Date(past + hour).toISOString() });
    expect(analytics.tokens.total).toBe(100);
    expect(analytics.tokens.buckets.map((bucket) => bucket.value)).toEqual([0, 100]);
    expect(analytics.spans.total).toBe(5);
  });

  test("a trace counts where its earliest span starts, whichever request brought its spans", async () => {
    const other = await bootstrapAccount(vigil.url);
    const otherTenant = await tenantOf(vigil.ctx, other.account.apiKey, other.account.projectSlug);
    const [before, inside, after] = [newTraceId(), newTraceId(), newTraceId()];
    const range = { fromIso: new Date(past).toISOString(), toIso: new Date(past + 6 * hour).toISOString() };
    // Each trace gets one span inside the range first; its other span arrives in a later insert.
    await insertSpans(vigil.ctx, [before, inside, after].map((trace_id) => spanRow(otherTenant, { trace_id, startMs: past + hour, durationMs: 1000 })));
    await insertSpans(vigil.ctx, [
      // Starts before the range: the trace is out, though one of its spans is in.
      spanRow(otherTenant, { trace_id: before, startMs: past - hour, durationMs: 1000 }),
      // Ends after the range: still in, with its whole duration.
      spanRow(otherTenant, { trace_id: inside, startMs: past + 5 * hour, durationMs: 2 * hour }),
      // Starts after the range: changes nothing about the trace's start.
      spanRow(otherTenant, { trace_id: after, startMs: past + 7 * hour, durationMs: 1000 }),
    ]);
    const analytics = await other.client.traces.analytics(other.account.projectSlug, range);
    expect(analytics.traces.total).toBe(2);
    expect(analytics.traces.buckets.map((bucket) => bucket.value)).toEqual([2]);
    // Durations: 6 h + 1 s (after) and 6 h (inside); the exact median of two is the upper one.
    expect(analytics.duration.median).toBe(6 * 3600 + 1);
  });

  test("the default range is the last 7 days", async () => {
    const analytics = await client.traces.analytics(slug);
    expect(analytics.traces.total).toBe(2);
    expect(analytics.traces.buckets.length).toBeGreaterThanOrEqual(14);
    expect(analytics.traces.buckets.length).toBeLessThanOrEqual(15);
    for (const { bucket } of analytics.traces.buckets) expect(new Date(bucket).getTime() % (12 * hour)).toBe(0);
  });

  test("bad ranges are 400s", async () => {
    expect((await sdkFailure(client.traces.analytics(slug, { fromIso: "soon" }))).body.error).toMatch(/^fromIso/);
    expect((await sdkFailure(client.traces.analytics(slug, { fromIso: "2026-01-02T00:00:00Z", toIso: "2026-01-01T00:00:00Z" }))).statusCode).toBe(400);
  });
});
