import { beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import type { Latitude, LatitudeClient } from "@latitude-data/sdk";
import type { Vigil } from "../src/server";
import { insertSpans, insertSpansSlowly, newTraceId, spanRow, tenantOf, type Tenant } from "./fixtures/spans";
import { bootstrapAccount, sharedVigil, startTestVigil } from "./helpers";
import { sdkFailure } from "./sdk";

setDefaultTimeout(60_000);

let vigil: Vigil;
let client: LatitudeClient;
let apiKey: string;
let slug: string;
let tenant: Tenant;

const hour = 3600_000;
const base = Math.floor((Date.now() - 6 * hour) / 1000) * 1000;
const iso = (ms: number) => new Date(ms).toISOString();

/** Four traces with distinct values in every filterable field. */
const ids = { alpha: newTraceId(), beta: newTraceId(), gamma: newTraceId(), delta: newTraceId() };
type Name = keyof typeof ids;
const starts: Record<Name, number> = { alpha: base, beta: base + hour, gamma: base + 2 * hour, delta: base + 3 * hour };

function fixtureRows(owner: Tenant) {
  const { alpha, beta, gamma, delta } = ids;
  return [
    // alpha: checkout, tools, cache reads, status ok, env=prod
    spanRow(owner, { trace_id: alpha, span_id: "a000000000000001", name: "checkout", startMs: starts.alpha, durationMs: 2000, status_code: "ok", session_id: "s-1", user_id: "u-1", tags: ["prod", "eu"], metadata: { env: "prod", region: "eu" }, service_name: "api" }),
    spanRow(owner, {
      trace_id: alpha,
      span_id: "a000000000000002",
      parent_span_id: "a000000000000001",
      name: "chat gpt-4o",
      operation: "chat",
      provider: "openai",
      model: "gpt-4o",
      startMs: starts.alpha + 100,
      durationMs: 1000,
      tokens_input: 100,
      tokens_output: 50,
      tokens_cache_read: 50,
      cost_total_microcents: 1000,
      time_to_first_token_ns: 200_000_000,
      defined_tools: ["search_docs", "lookup_order"],
      service_name: "api",
      message_text: "What is your refund policy for my damaged iPhone parcel?\nRefunds are issued within 14 days.",
    }),
    spanRow(owner, { trace_id: alpha, parent_span_id: "a000000000000001", name: "search_docs", operation: "execute_tool", tool_name: "search_docs", startMs: starts.alpha + 1200, durationMs: 300, service_name: "api" }),
    // beta: support, an error span, anthropic, staging
    spanRow(owner, { trace_id: beta, span_id: "b000000000000001", name: "support", startMs: starts.beta, durationMs: 10_000, status_code: "ok", session_id: "s-2", user_id: "u-2", tags: ["staging"], metadata: { env: "staging" }, service_name: "worker" }),
    spanRow(owner, {
      trace_id: beta,
      parent_span_id: "b000000000000001",
      name: "chat claude",
      operation: "chat",
      provider: "anthropic",
      model: "claude-sonnet-4",
      startMs: starts.beta + 500,
      durationMs: 4000,
      status_code: "error",
      tokens_input: 300,
      tokens_output: 20,
      cost_total_microcents: 5000,
      time_to_first_token_ns: 800_000_000,
      service_name: "worker",
      message_text: "Will it rain tomorrow? The forecast says light rain and a cold policy wind.",
    }),
    // gamma: checkout again, no session or user, a simulation, status unset, ttft not measured
    spanRow(owner, { trace_id: gamma, span_id: "c000000000000001", name: "checkout", startMs: starts.gamma, durationMs: 500, simulation_id: "simulation0000000000000a", service_name: "api" }),
    spanRow(owner, { trace_id: gamma, parent_span_id: "c000000000000001", name: "chat mini", operation: "chat", provider: "openai", model: "gpt-4o-mini", startMs: starts.gamma + 10, durationMs: 400, tokens_input: 10, tokens_output: 10, cost_total_microcents: 10, service_name: "api" }),
    // delta: report, three spans, expensive
    spanRow(owner, { trace_id: delta, span_id: "d000000000000001", name: "report", startMs: starts.delta, durationMs: 30_000, status_code: "ok", session_id: "s-1", user_id: "u-3", tags: ["prod"], metadata: { env: "prod" }, service_name: "api" }),
    spanRow(owner, { trace_id: delta, parent_span_id: "d000000000000001", name: "chat", operation: "chat", provider: "openai", model: "gpt-4o", startMs: starts.delta + 1000, durationMs: 20_000, tokens_input: 1000, tokens_output: 500, cost_total_microcents: 20_000, time_to_first_token_ns: 100_000_000, service_name: "api" }),
    spanRow(owner, { trace_id: delta, parent_span_id: "d000000000000001", name: "search_docs", operation: "execute_tool", tool_name: "search_docs", startMs: starts.delta + 22_000, durationMs: 100, service_name: "api" }),
  ];
}

beforeAll(async () => {
  vigil = await sharedVigil();
  const created = await bootstrapAccount(vigil.url, { projectName: "Trace list" });
  client = created.client;
  apiKey = created.account.apiKey;
  slug = created.account.projectSlug;
  tenant = await tenantOf(vigil.ctx, apiKey, slug);
  await insertSpans(vigil.ctx, fixtureRows(tenant));
});

const all: Name[] = ["alpha", "beta", "gamma", "delta"];
const nameOf = (traceId: string) => (Object.keys(ids) as Name[]).find((name) => ids[name] === traceId) ?? traceId;

async function matching(filters: Record<string, { op: string; value: unknown }[]>): Promise<Name[]> {
  const page = await client.traces.list(slug, { filters: filters as never, limit: 200 });
  return page.items.map((item) => nameOf(item.traceId) as Name).sort();
}
const names = (...list: Name[]) => [...list].sort();

describe("trace list items", () => {
  test("every Trace field, rolled up from the spans", async () => {
    const page = await client.traces.list(slug);
    expect(page.hasMore).toBe(false);
    expect(page.nextCursor).toBeNull();
    expect(page.items.map((item) => nameOf(item.traceId))).toEqual(["delta", "gamma", "beta", "alpha"]);
    const alpha = page.items.find((item) => item.traceId === ids.alpha)!;
    expect(alpha).toEqual({
      organizationId: tenant.organizationId,
      projectId: tenant.projectId,
      traceId: ids.alpha,
      spanCount: 3,
      errorCount: 0,
      startTime: iso(starts.alpha).replace("Z", "000000Z"),
      endTime: iso(starts.alpha + 2000).replace("Z", "000000Z"),
      durationNs: 2_000_000_000,
      // From the trace's start: the chat starts 100 ms in and measured its first token 200 ms later.
      timeToFirstTokenNs: 300_000_000,
      tokensInput: 100,
      tokensOutput: 50,
      tokensCacheRead: 50,
      tokensCacheCreate: 0,
      tokensReasoning: 0,
      tokensTotal: 200,
      costInputMicrocents: 0,
      costOutputMicrocents: 0,
      costTotalMicrocents: 1000,
      sessionId: "s-1",
      userId: "u-1",
      simulationId: null,
      tags: ["eu", "prod"],
      models: ["gpt-4o"],
      providers: ["openai"],
      serviceNames: ["api"],
      rootSpanId: "a000000000000001",
      rootSpanName: "checkout",
      positiveAnnotationCount: 0,
      negativeAnnotationCount: 0,
    });
    const gamma = page.items.find((item) => item.traceId === ids.gamma)!;
    expect(gamma).toMatchObject({ sessionId: null, userId: null, simulationId: "simulation0000000000000a", tags: [], timeToFirstTokenNs: 0 });
  });

  test("a filtered page's items are the same items, field for field", async () => {
    const everything = await client.traces.list(slug);
    const filtered = await client.traces.list(slug, { filters: { tags: [{ op: "eq", value: "prod" }] } as never });
    expect(filtered.items.map((item) => nameOf(item.traceId))).toEqual(["delta", "alpha"]);
    expect(filtered.items).toEqual(everything.items.filter((item) => item.traceId === ids.delta || item.traceId === ids.alpha));
  });

  test("a trace without its root span has null root fields", async () => {
    const orphan = newTraceId();
    const other = await bootstrapAccount(vigil.url);
    const otherTenant = await tenantOf(vigil.ctx, other.account.apiKey, other.account.projectSlug);
    await insertSpans(vigil.ctx, [spanRow(otherTenant, { trace_id: orphan, parent_span_id: "ffffffffffffffff", startMs: base })]);
    const [item] = (await other.client.traces.list(other.account.projectSlug)).items;
    expect(item).toMatchObject({ traceId: orphan, rootSpanId: null, rootSpanName: null, spanCount: 1 });
  });
});

describe("filters", () => {
  test("string fields: eq, neq, in, notIn, contains, notContains", async () => {
    expect(await matching({ name: [{ op: "eq", value: "checkout" }] })).toEqual(names("alpha", "gamma"));
    expect(await matching({ name: [{ op: "neq", value: "checkout" }] })).toEqual(names("beta", "delta"));
    expect(await matching({ sessionId: [{ op: "in", value: ["s-1", "s-2"] }] })).toEqual(names("alpha", "beta", "delta"));
    expect(await matching({ sessionId: [{ op: "notIn", value: ["s-1"] }] })).toEqual(names("beta", "gamma"));
    expect(await matching({ userId: [{ op: "contains", value: "U-" }] })).toEqual(names("alpha", "beta", "delta"));
    expect(await matching({ userId: [{ op: "notContains", value: "2" }] })).toEqual(names("alpha", "gamma", "delta"));
    expect(await matching({ traceId: [{ op: "eq", value: ids.beta }] })).toEqual(names("beta"));
    expect(await matching({ simulationId: [{ op: "eq", value: "simulation0000000000000a" }] })).toEqual(names("gamma"));
  });

  test("list fields: eq, neq, in, notIn, contains, notContains", async () => {
    expect(await matching({ tags: [{ op: "eq", value: "prod" }] })).toEqual(names("alpha", "delta"));
    expect(await matching({ tags: [{ op: "neq", value: "prod" }] })).toEqual(names("beta", "gamma"));
    expect(await matching({ tags: [{ op: "in", value: ["eu", "staging"] }] })).toEqual(names("alpha", "beta"));
    expect(await matching({ tags: [{ op: "notIn", value: ["eu", "staging"] }] })).toEqual(names("gamma", "delta"));
    expect(await matching({ models: [{ op: "contains", value: "GPT" }] })).toEqual(names("alpha", "gamma", "delta"));
    expect(await matching({ models: [{ op: "notContains", value: "mini" }] })).toEqual(names("alpha", "beta", "delta"));
    expect(await matching({ providers: [{ op: "eq", value: "anthropic" }] })).toEqual(names("beta"));
    expect(await matching({ serviceNames: [{ op: "in", value: ["worker"] }] })).toEqual(names("beta"));
    expect(await matching({ tools: [{ op: "eq", value: "search_docs" }] })).toEqual(names("alpha", "delta"));
    expect(await matching({ definedTools: [{ op: "in", value: ["lookup_order"] }] })).toEqual(names("alpha"));
  });

  test("number fields: eq, neq, gt, gte, lt, lte, in, notIn", async () => {
    expect(await matching({ duration: [{ op: "gt", value: 2_000_000_000 }] })).toEqual(names("beta", "delta"));
    expect(await matching({ duration: [{ op: "gte", value: 2_000_000_000 }] })).toEqual(names("alpha", "beta", "delta"));
    expect(await matching({ cost: [{ op: "lt", value: 1000 }] })).toEqual(names("gamma"));
    expect(await matching({ cost: [{ op: "lte", value: 1000 }] })).toEqual(names("alpha", "gamma"));
    expect(await matching({ spanCount: [{ op: "eq", value: 3 }] })).toEqual(names("alpha", "delta"));
    expect(await matching({ spanCount: [{ op: "neq", value: 3 }] })).toEqual(names("beta", "gamma"));
    expect(await matching({ errorCount: [{ op: "gte", value: 1 }] })).toEqual(names("beta"));
    expect(await matching({ tokensInput: [{ op: "in", value: [100, 300] }] })).toEqual(names("alpha", "beta"));
    expect(await matching({ tokensOutput: [{ op: "notIn", value: [50, "20"] }] })).toEqual(names("gamma", "delta"));
    expect(await matching({ ttft: [{ op: "eq", value: 0 }] })).toEqual(names("gamma"));
    expect(await matching({ cacheHitRate: [{ op: "gt", value: 0.3 }, { op: "lt", value: 0.34 }] })).toEqual(names("alpha"));
  });

  test("time fields take ISO-8601: eq, neq, gt, gte, lt, lte", async () => {
    expect(await matching({ startTime: [{ op: "gte", value: iso(starts.beta) }] })).toEqual(names("beta", "gamma", "delta"));
    expect(await matching({ startTime: [{ op: "gt", value: iso(starts.beta) }] })).toEqual(names("gamma", "delta"));
    expect(await matching({ startTime: [{ op: "eq", value: iso(starts.gamma) }] })).toEqual(names("gamma"));
    expect(await matching({ startTime: [{ op: "neq", value: iso(starts.gamma) }] })).toEqual(names("alpha", "beta", "delta"));
    expect(await matching({ endTime: [{ op: "lt", value: iso(starts.beta + 10_000) }] })).toEqual(names("alpha"));
    const offset = new Date(starts.beta + 10_000).toISOString().replace("Z", "+00:00");
    expect(await matching({ endTime: [{ op: "lte", value: offset }] })).toEqual(names("alpha", "beta"));
    // Nanosecond precision: one nanosecond after alpha's start excludes it.
    const justAfter = `${iso(starts.alpha).slice(0, 19)}.000000001Z`;
    expect(await matching({ startTime: [{ op: "gte", value: justAfter }] })).toEqual(names("beta", "gamma", "delta"));
  });

  test("status: error when a span errored, else ok when one was ok, else unset", async () => {
    expect(await matching({ status: [{ op: "eq", value: "error" }] })).toEqual(names("beta"));
    expect(await matching({ status: [{ op: "eq", value: "OK" }] })).toEqual(names("alpha", "delta"));
    expect(await matching({ status: [{ op: "in", value: ["unset", "error"] }] })).toEqual(names("beta", "gamma"));
    expect(await matching({ status: [{ op: "notIn", value: ["ok"] }] })).toEqual(names("beta", "gamma"));
    expect(await matching({ status: [{ op: "neq", value: "error" }] })).toEqual(names("alpha", "gamma", "delta"));
  });

  test("metadata.<key>: any span carrying the key and value", async () => {
    expect(await matching({ "metadata.env": [{ op: "eq", value: "prod" }] })).toEqual(names("alpha", "delta"));
    expect(await matching({ "metadata.env": [{ op: "neq", value: "prod" }] })).toEqual(names("beta", "gamma"));
    expect(await matching({ "metadata.env": [{ op: "in", value: ["staging"] }] })).toEqual(names("beta"));
    expect(await matching({ "metadata.env": [{ op: "notIn", value: ["staging", "prod"] }] })).toEqual(names("gamma"));
    expect(await matching({ "metadata.region": [{ op: "contains", value: "E" }] })).toEqual(names("alpha"));
    expect(await matching({ "metadata.region": [{ op: "notContains", value: "e" }] })).toEqual(names("beta", "gamma", "delta"));
  });

  test("booleans (score.passed): eq, neq", async () => {
    await client.scores.create(slug, { body: { value: 1, passed: true, feedback: "good", trace: { by: "id", id: ids.alpha }, sourceId: "qa" } as never });
    await client.scores.create(slug, { body: { value: 0, passed: false, feedback: "bad", trace: { by: "id", id: ids.beta }, sourceId: "qa" } as never });
    expect(await matching({ "score.passed": [{ op: "eq", value: true }] })).toEqual(names("alpha"));
    expect(await matching({ "score.passed": [{ op: "neq", value: false }] })).toEqual(names("alpha", "gamma", "delta"));
  });

  test("conditions on one field and across fields are ANDed", async () => {
    expect(await matching({ name: [{ op: "eq", value: "checkout" }], tags: [{ op: "eq", value: "prod" }] })).toEqual(names("alpha"));
    expect(await matching({ cost: [{ op: "gt", value: 10 }, { op: "lt", value: 20_000 }] })).toEqual(names("alpha", "beta"));
  });

  test("gtePercentile: at or above the percentile of the project's traces in the filter window", async () => {
    // Durations 0.5 s (gamma), 2 s (alpha), 10 s (beta), 30 s (delta): the exact median is the upper middle value.
    expect(await matching({ duration: [{ op: "gtePercentile", value: 50 }] })).toEqual(names("beta", "delta"));
    expect(await matching({ duration: [{ op: "gtePercentile", value: "50" }] })).toEqual(names("beta", "delta"));
    expect(await matching({ cost: [{ op: "gtePercentile", value: 100 }] })).toEqual(names("delta"));
    expect(await matching({ ttft: [{ op: "gtePercentile", value: 0 }] })).toEqual(all.slice().sort());
    // From gamma on, the window holds 0.5 s and 30 s: its 25th percentile is 0.5 s. Over all four
    // traces it would be 2 s, which gamma does not reach.
    const fromGamma = { startTime: [{ op: "gte", value: iso(starts.gamma) }] };
    expect(await matching({ ...fromGamma, duration: [{ op: "gtePercentile", value: 25 }] })).toEqual(names("gamma", "delta"));
    // Before gamma, the window holds 2 s and 10 s: its 75th percentile is 10 s. Over all four traces
    // it would be 30 s, which beta does not reach.
    const beforeGamma = { startTime: [{ op: "lt", value: iso(starts.gamma) }] };
    expect(await matching({ ...beforeGamma, duration: [{ op: "gtePercentile", value: "75" }] })).toEqual(names("beta"));
  });

  test("an unknown field, a bad operator or a bad value is a 400 naming it", async () => {
    const rejected = async (filters: Record<string, unknown>, message: RegExp) => {
      const failure = await sdkFailure(client.traces.list(slug, { filters: filters as never }));
      expect(failure.statusCode).toBe(400);
      expect(failure.body.error).toMatch(message);
    };
    await rejected({ colour: [{ op: "eq", value: "red" }] }, /filters\.colour: unknown filter field/);
    await rejected({ "metadata.": [{ op: "eq", value: "x" }] }, /filters\.metadata\.: unknown filter field/);
    await rejected({ tags: [{ op: "gt", value: "a" }] }, /filters\.tags\[0\]\.op: gt does not apply to tags/);
    await rejected({ cost: [{ op: "between", value: 1 }] }, /filters\.cost\[0\]\.op: unknown operator "between"/);
    await rejected({ tags: [{ op: "in", value: "prod" }] }, /filters\.tags\[0\]\.value must be a non-empty array for in/);
    await rejected({ tags: [{ op: "notIn", value: [] }] }, /filters\.tags\[0\]\.value must be a non-empty array for notIn/);
    await rejected({ name: [{ op: "eq", value: ["a"] }] }, /filters\.name\[0\]\.value must be a single value/);
    await rejected({ spanCount: [{ op: "gtePercentile", value: 50 }] }, /filters\.spanCount\[0\]\.op: gtePercentile is supported only on duration, ttft and cost/);
    await rejected({ startTime: [{ op: "gtePercentile", value: 50 }] }, /gtePercentile is supported only/);
    await rejected({ duration: [{ op: "gtePercentile", value: 101 }] }, /filters\.duration\[0\]\.value must be a percentile/);
    await rejected({ duration: [{ op: "gtePercentile", value: "ninety" }] }, /filters\.duration\[0\]\.value must be a percentile/);
    await rejected({ duration: [{ op: "gtePercentile", value: true }] }, /filters\.duration\[0\]\.value must be a percentile/);
    await rejected({ duration: [{ op: "gt", value: "fast" }] }, /filters\.duration\[0\]\.value must be a number/);
    await rejected({ startTime: [{ op: "gt", value: "yesterday" }] }, /filters\.startTime\[0\]\.value must be an ISO-8601 timestamp/);
    await rejected({ startTime: [{ op: "gt", value: "2026-02-30T00:00:00Z" }] }, /must be an ISO-8601 timestamp/);
    await rejected({ status: [{ op: "eq", value: "broken" }] }, /filters\.status\[0\]\.value must be one of ok, error, unset/);
    await rejected({ status: [{ op: "contains", value: "o" }] }, /contains does not apply to status/);
    await rejected({ "score.passed": [{ op: "eq", value: "maybe" }] }, /filters\.score\.passed\[0\]\.value must be a boolean/);
  });

  test("filter values reach SQL only as parameters", async () => {
    const hostile = "x' OR 1=1 OR name != '";
    expect(await matching({ name: [{ op: "eq", value: hostile }] })).toEqual([]);
    expect(await matching({ [`metadata.${hostile}`]: [{ op: "eq", value: hostile }] })).toEqual([]);
    expect(await matching({ tags: [{ op: "contains", value: "%') OR ('1'='1" }] })).toEqual([]);
  });
});

describe("sorting", () => {
  const expectations: [string, Name[]][] = [
    ["startTime", ["alpha", "beta", "gamma", "delta"]],
    ["endTime", ["alpha", "beta", "gamma", "delta"]],
    ["durationNs", ["gamma", "alpha", "beta", "delta"]],
    ["tokensTotal", ["gamma", "alpha", "beta", "delta"]],
    ["costTotalMicrocents", ["gamma", "alpha", "beta", "delta"]],
  ];
  for (const [sortBy, ascending] of expectations) {
    test(`${sortBy} in both directions`, async () => {
      const asc = await client.traces.list(slug, { sortBy: sortBy as never, sortDirection: "asc" });
      expect(asc.items.map((item) => nameOf(item.traceId))).toEqual(ascending);
      const desc = await client.traces.list(slug, { sortBy: sortBy as never, sortDirection: "desc" });
      expect(desc.items.map((item) => nameOf(item.traceId))).toEqual([...ascending].reverse());
    });
  }

  test("ties are broken by trace id, in the sort's direction", async () => {
    const other = await bootstrapAccount(vigil.url);
    const otherTenant = await tenantOf(vigil.ctx, other.account.apiKey, other.account.projectSlug);
    const tied = [newTraceId(), newTraceId(), newTraceId()];
    await insertSpans(vigil.ctx, tied.map((trace_id) => spanRow(otherTenant, { trace_id, startMs: base, durationMs: 50 })));
    for (const sortDirection of ["asc", "desc"] as const) {
      const first = await other.client.traces.list(other.account.projectSlug, { sortBy: "durationNs", sortDirection, limit: 2 });
      const second = await other.client.traces.list(other.account.projectSlug, { sortBy: "durationNs", sortDirection, limit: 2, cursor: first.nextCursor! });
      const order = [...first.items, ...second.items].map((item) => item.traceId);
      const expected = [...tied].sort();
      expect(order).toEqual(sortDirection === "asc" ? expected : expected.reverse());
    }
  });
});

describe("full-text search", () => {
  test("the query finds traces by their messages, ANDed with filters", async () => {
    const found = await client.traces.list(slug, { query: "refund" });
    expect(found.items.map((item) => nameOf(item.traceId))).toEqual(["alpha"]);
    const capitalised = await client.traces.list(slug, { query: "REFUNDS" });
    expect(capitalised.items.map((item) => nameOf(item.traceId))).toEqual(["alpha"]);
    // Mixed case in the text ("iPhone") matches the query in any case.
    for (const query of ["iphone", "IPHONE", "iPhone"]) {
      expect((await client.traces.list(slug, { query })).items.map((item) => nameOf(item.traceId))).toEqual(["alpha"]);
    }
    const filtered = await client.traces.list(slug, { query: "refund", filters: { tags: [{ op: "eq", value: "staging" }] } });
    expect(filtered.items).toEqual([]);
    expect((await client.traces.list(slug, { query: "nothing-like-this" })).items).toEqual([]);
  });

  test("relevance puts the best match first, then the most recent", async () => {
    // alpha has both words; beta has only "policy" but is more recent.
    const ranked = await client.traces.list(slug, { query: "refund policy", sortBy: "relevance" });
    expect(ranked.items.map((item) => nameOf(item.traceId))).toEqual(["alpha", "beta"]);
    const byTime = await client.traces.list(slug, { query: "refund policy", sortBy: "startTime" });
    expect(byTime.items.map((item) => nameOf(item.traceId))).toEqual(["beta", "alpha"]);
    const worstFirst = await client.traces.list(slug, { query: "refund policy", sortBy: "relevance", sortDirection: "asc" });
    expect(worstFirst.items.map((item) => nameOf(item.traceId))).toEqual(["beta", "alpha"]);
    const paged = await client.traces.list(slug, { query: "refund policy", sortBy: "relevance", limit: 1 });
    const next = await client.traces.list(slug, { query: "refund policy", sortBy: "relevance", limit: 1, cursor: paged.nextCursor! });
    expect([...paged.items, ...next.items].map((item) => nameOf(item.traceId))).toEqual(["alpha", "beta"]);
    expect(next.hasMore).toBe(false);
  });

  test("a query longer than 500 characters is a 400", async () => {
    const failure = await sdkFailure(client.traces.list(slug, { query: "x".repeat(501) }));
    expect(failure.statusCode).toBe(400);
    expect(failure.body.error).toMatch(/^query/);
  });
});

describe("request validation", () => {
  test("the default limit is 50", async () => {
    const other = await bootstrapAccount(vigil.url);
    const otherTenant = await tenantOf(vigil.ctx, other.account.apiKey, other.account.projectSlug);
    await insertSpans(vigil.ctx, Array.from({ length: 53 }, (_, i) => spanRow(otherTenant, { trace_id: newTraceId(), startMs: base + i * 1000 })));
    const first = await other.client.traces.list(other.account.projectSlug);
    expect(first.items).toHaveLength(50);
    expect(first.hasMore).toBe(true);
    const rest = await other.client.traces.list(other.account.projectSlug, { cursor: first.nextCursor! });
    expect(rest.items).toHaveLength(3);
    expect(rest.hasMore).toBe(false);
  });

  test("limit is 1 to 200; sort values are checked", async () => {
    for (const body of [{ limit: 0 }, { limit: 201 }, { sortBy: "name" }, { sortDirection: "up" }]) {
      const failure = await sdkFailure(client.traces.list(slug, body as never));
      expect(failure.statusCode).toBe(400);
      expect(failure.body.error).toMatch(new RegExp(`^${Object.keys(body)[0]}`));
    }
  });

  test("a cursor is opaque and belongs to one walk", async () => {
    const first = await client.traces.list(slug, { limit: 1 });
    const other = await sdkFailure(client.traces.list(slug, { limit: 1, cursor: first.nextCursor!, sortBy: "durationNs" }));
    expect(other.statusCode).toBe(400);
    expect(other.body.error).toMatch(/^cursor/);
    const filtered = await sdkFailure(client.traces.list(slug, { limit: 1, cursor: first.nextCursor!, filters: { tags: [{ op: "eq", value: "prod" }] } }));
    expect(filtered.statusCode).toBe(400);
    const forged = await sdkFailure(client.traces.list(slug, { cursor: "bm90IGEgY3Vyc29y" }));
    expect(forged.statusCode).toBe(400);
    expect(forged.body.error).toBe("cursor: is not a cursor returned by this list");
  });
});

describe("cursor paging while spans keep arriving", () => {
  /** Walks every page and returns the trace ids in order. */
  async function walk(other: LatitudeClient, projectSlug: string, body: Record<string, unknown>, between?: (page: number) => Promise<void>) {
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let page = 0; ; page++) {
      if (page === 50) throw new Error("the walk does not end");
      const result = await other.traces.list(projectSlug, { ...body, cursor, limit: 3 } as never);
      seen.push(...result.items.map((item) => item.traceId));
      if (!result.nextCursor) break;
      cursor = result.nextCursor;
      await between?.(page);
    }
    return seen;
  }

  /**
   * Walks each sort twice over 12 traces: undisturbed, then with late spans between pages that move
   * every trace and new traces at both ends; both walks must be the same.
   */
  async function walkWhileSpansArrive(bodies: Record<string, unknown>[]) {
    const other = await bootstrapAccount(vigil.url);
    const otherSlug = other.account.projectSlug;
    const otherTenant = await tenantOf(vigil.ctx, other.account.apiKey, otherSlug);
    const traceIds = Array.from({ length: 12 }, () => newTraceId());
    await insertSpans(
      vigil.ctx,
      traceIds.map((trace_id, i) =>
        spanRow(otherTenant, { trace_id, startMs: base + i * 60_000, durationMs: 1000, tokens_input: 10 * (i + 1), cost_total_microcents: 10 * (i + 1) }),
      ),
    );
    for (const [round, body] of bodies.entries()) {
      const expected = await walk(other.client, otherSlug, body);
      expect(new Set(expected).size).toBe(expected.length);
      expect(traceIds.every((id) => expected.includes(id))).toBe(true);
      const seen = await walk(other.client, otherSlug, body, async (page) => {
        // Every trace gets an earlier start, a later end (in the reverse order), more tokens and more
        // cost than ever before; new traces appear at both ends.
        const hours = (round * 10 + page + 1) * 3600_000;
        await insertSpans(vigil.ctx, [
          ...traceIds.map((trace_id, i) =>
            spanRow(otherTenant, {
              trace_id,
              startMs: base - hours - i * 1000,
              durationMs: 2 * hours + (12 - i) * 7000 + i * 1000,
              tokens_input: 1000 * (12 - i),
              cost_total_microcents: 1000 * (12 - i),
            }),
          ),
          spanRow(otherTenant, { trace_id: newTraceId(), startMs: base + 24 * 3600_000 }),
          spanRow(otherTenant, { trace_id: newTraceId(), startMs: base - 48 * 3600_000 }),
        ]);
      });
      expect(seen).toEqual(expected);
    }
  }

  test("late spans that move traces across the cursor, and new traces, neither repeat nor skip a trace: time sorts", async () => {
    await walkWhileSpansArrive([
      { sortBy: "startTime", sortDirection: "desc" },
      { sortBy: "startTime", sortDirection: "asc" },
      { sortBy: "endTime", sortDirection: "desc" },
      { sortBy: "endTime", sortDirection: "asc" },
    ]);
  }, 60_000);

  test("late spans that move traces across the cursor, and new traces, neither repeat nor skip a trace: aggregate sorts", async () => {
    await walkWhileSpansArrive([
      { sortBy: "tokensTotal", sortDirection: "desc" },
      { sortBy: "costTotalMicrocents", sortDirection: "desc" },
      { sortBy: "costTotalMicrocents", sortDirection: "asc" },
      { sortBy: "durationNs", sortDirection: "asc" },
    ]);
  }, 60_000);

  test("traces whose roll-up rows a merge combined across the snapshot are read from their spans", async () => {
    const other = await bootstrapAccount(vigil.url);
    const otherSlug = other.account.projectSlug;
    const otherTenant = await tenantOf(vigil.ctx, other.account.apiKey, otherSlug);
    const traceIds = Array.from({ length: 9 }, () => newTraceId());
    await insertSpans(vigil.ctx, traceIds.map((trace_id, i) => spanRow(otherTenant, { trace_id, startMs: base + i * 60_000, tokens_input: 10 })));
    const body = { sortBy: "startTime", sortDirection: "desc", filters: { tokensInput: [{ op: "lt", value: 100 }] } };
    const expected = await walk(other.client, otherSlug, body);
    expect(expected).toEqual([...traceIds].reverse());
    const items: Latitude.Trace[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < traceIds.length; page++) {
      const result = await other.client.traces.list(otherSlug, { ...body, cursor, limit: 3 } as never);
      items.push(...result.items);
      if (!result.nextCursor) break;
      cursor = result.nextCursor;
      // Late spans move every trace and push its tokens past the filter; the merge folds each trace's
      // rows from before and after the snapshot into one.
      await insertSpans(vigil.ctx, traceIds.map((trace_id, i) => spanRow(otherTenant, { trace_id, startMs: base - (page + 1) * 3600_000 - i * 1000, tokens_input: 1000 })));
      await vigil.ctx.ch.client.command({ query: `OPTIMIZE TABLE ${vigil.ctx.ch.database}.traces FINAL` });
    }
    expect(items.map((item) => item.traceId)).toEqual(expected);
    expect(items.map((item) => [item.spanCount, item.tokensInput])).toEqual(traceIds.map(() => [1, 10]));
  }, 30_000);

  test("a filtered walk reads the filters at its snapshot too", async () => {
    const other = await bootstrapAccount(vigil.url);
    const otherSlug = other.account.projectSlug;
    const otherTenant = await tenantOf(vigil.ctx, other.account.apiKey, otherSlug);
    const traceIds = Array.from({ length: 12 }, () => newTraceId());
    // Odd traces are ok and last 1 s; even ones have no status.
    await insertSpans(
      vigil.ctx,
      traceIds.map((trace_id, i) =>
        spanRow(otherTenant, { trace_id, startMs: base + i * 60_000, durationMs: 1000, status_code: i % 2 ? "ok" : "unset", metadata: { env: "prod" } }),
      ),
    );
    const body = {
      sortBy: "startTime",
      sortDirection: "desc",
      filters: { status: [{ op: "eq", value: "ok" }], duration: [{ op: "lt", value: 60_000_000_000 }], "metadata.env": [{ op: "eq", value: "prod" }] },
    };
    const expected = await walk(other.client, otherSlug, body);
    expect(expected).toEqual(traceIds.filter((_, i) => i % 2).reverse());
    const seen = await walk(other.client, otherSlug, body, async (page) => {
      // After the snapshot, even traces become ok, odd ones too long, and new matching traces arrive.
      await insertSpans(vigil.ctx, [
        ...traceIds.map((trace_id, i) =>
          spanRow(otherTenant, { trace_id, startMs: base + i * 60_000 + 10, durationMs: i % 2 ? 120_000 : 10, status_code: "ok", metadata: { env: "prod" } }),
        ),
        spanRow(otherTenant, { trace_id: newTraceId(), startMs: base + (page * 2 + 1) * 30_000, status_code: "ok", metadata: { env: "prod" } }),
      ]);
    });
    expect(seen).toEqual(expected);
    // A new walk sees what arrived since.
    const after = await walk(other.client, otherSlug, body);
    expect(after.filter((id) => traceIds.includes(id))).toEqual(traceIds.filter((_, i) => i % 2 === 0).reverse());
  }, 30_000);

  test("an insert that started before the first page and commits after it is in no page of the walk", async () => {
    const other = await bootstrapAccount(vigil.url);
    const otherSlug = other.account.projectSlug;
    const otherTenant = await tenantOf(vigil.ctx, other.account.apiKey, otherSlug);
    const traceIds = Array.from({ length: 12 }, () => newTraceId());
    await insertSpans(vigil.ctx, traceIds.map((trace_id, i) => spanRow(otherTenant, { trace_id, startMs: base + i * 60_000 })));
    const body = { sortBy: "startTime", sortDirection: "desc" };
    const expected = await walk(other.client, otherSlug, body);
    expect(expected).toEqual([...traceIds].reverse());

    // The newest trace (first page) gets the earliest start, and a new trace lands mid-walk; the rows'
    // ingested_at is the insert's start, before the first page, but they are visible only after it.
    const slow = insertSpansSlowly(
      vigil.ctx,
      [
        spanRow(otherTenant, { trace_id: traceIds[11], startMs: base - 3600_000 }),
        spanRow(otherTenant, { trace_id: newTraceId(), startMs: base + 5 * 60_000 + 30_000 }),
      ],
      2,
    );
    await slow.started;
    let committed = false;
    const done = slow.committed.then(() => (committed = true));
    const first = await other.client.traces.list(otherSlug, { ...body, limit: 3 } as never);
    expect(committed).toBe(false);
    await done;
    const seen = first.items.map((item) => item.traceId);
    for (let cursor = first.nextCursor; cursor; ) {
      const page = await other.client.traces.list(otherSlug, { ...body, limit: 3, cursor } as never);
      seen.push(...page.items.map((item) => item.traceId));
      cursor = page.nextCursor;
    }
    expect(seen).toEqual(expected);
    const fresh = await walk(other.client, otherSlug, body);
    expect(fresh.at(-1)).toBe(traceIds[11]);
    expect(fresh).toHaveLength(13);
  }, 30_000);

  test("a walk under continuous concurrent ingest returns each trace that existed when it began exactly once", async () => {
    const other = await bootstrapAccount(vigil.url);
    const otherSlug = other.account.projectSlug;
    const otherTenant = await tenantOf(vigil.ctx, other.account.apiKey, otherSlug);
    const existing = Array.from({ length: 20 }, () => newTraceId());
    await insertSpans(vigil.ctx, existing.map((trace_id, i) => spanRow(otherTenant, { trace_id, startMs: base + i * 1000 })));
    let ingesting = true;
    let inserts = 0;
    const ingest = (async () => {
      while (ingesting) {
        const target = existing[inserts % existing.length];
        await insertSpans(vigil.ctx, [
          spanRow(otherTenant, { trace_id: target, startMs: base - inserts * 500, durationMs: 100 }),
          spanRow(otherTenant, { trace_id: newTraceId(), startMs: base + (inserts % 2 ? 1 : -1) * 10 * hour }),
        ]);
        inserts++;
      }
    })();
    const seen = await walk(other.client, otherSlug, { sortBy: "startTime", sortDirection: "desc" }, () => Bun.sleep(20));
    ingesting = false;
    await ingest;
    expect(inserts).toBeGreaterThan(2);
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen.filter((id) => existing.includes(id)).sort()).toEqual([...existing].sort());
  }, 30_000);
});

describe("organization-scoped path and isolation", () => {
  test("the spec's path form serves the same list; a foreign organization is a 404", async () => {
    const body = JSON.stringify({ limit: 2 });
    const headers = { authorization: `Bearer ${apiKey}`, "content-type": "application/json" };
    const byId = await fetch(`${vigil.url}/v1/organizations/${tenant.organizationId}/projects/${tenant.projectId}/traces/list`, { method: "POST", headers, body });
    expect(byId.status).toBe(200);
    const bySlug = await fetch(`${vigil.url}/v1/organizations/${tenant.organizationId}/projects/${slug}/traces/list`, { method: "POST", headers, body });
    expect(((await bySlug.json()) as { items: unknown[] }).items).toHaveLength(2);
    const foreign = await fetch(`${vigil.url}/v1/organizations/xxxxxxxxxxxxxxxxxxxxxxxx/projects/${tenant.projectId}/traces/list`, { method: "POST", headers, body });
    expect(foreign.status).toBe(404);
  });

  test("another organization's key sees nothing of this project", async () => {
    const stranger = await bootstrapAccount(vigil.url);
    expect((await stranger.client.traces.list(stranger.account.projectSlug)).items).toEqual([]);
    expect((await sdkFailure(stranger.client.traces.list(slug))).statusCode).toBe(404);
    expect((await sdkFailure(stranger.client.traces.get(slug, ids.alpha))).statusCode).toBe(404);
    expect((await sdkFailure(stranger.client.traces.get(stranger.account.projectSlug, ids.alpha))).statusCode).toBe(404);
    expect((await sdkFailure(stranger.client.traces.listSpans(stranger.account.projectSlug, ids.alpha))).statusCode).toBe(404);
    const analytics = await stranger.client.traces.analytics(stranger.account.projectSlug, { fromIso: iso(base - hour), toIso: iso(base + 5 * hour) });
    expect(analytics.traces.total).toBe(0);
  });
});

describe("list rows never read message columns", () => {
  test("sorts, paging, every kind of filter, analytics and the span list work while reading a message column fails", async () => {
    // A Vigil of its own: its spans table loses its message columns.
    const own = await startTestVigil();
    try {
      const created = await bootstrapAccount(own.url);
      const ownTenant = await tenantOf(own.ctx, created.account.apiKey, created.account.projectSlug);
      const { client: ownClient } = created;
      const ownSlug = created.account.projectSlug;
      await insertSpans(own.ctx, fixtureRows(ownTenant));
      const spans = `${own.ctx.ch.database}.spans`;
      await own.ctx.ch.client.command({ query: `ALTER TABLE ${spans} DROP INDEX message_words_idx` });
      for (const column of ["system_instructions", "input_messages", "output_messages", "message_text", "tool_input", "tool_output", "tool_definitions"]) {
        await own.ctx.ch.client.command({ query: `ALTER TABLE ${spans} DROP COLUMN ${column}` });
        await own.ctx.ch.client.command({ query: `ALTER TABLE ${spans} ADD COLUMN ${column} String ALIAS toString(throwIf(length(span_id) >= 0, 'read ${column}'))` });
      }
      // Reading a message column now fails: a trace's detail does.
      const [alpha] = (await ownClient.traces.list(ownSlug, { filters: { name: [{ op: "eq", value: "checkout" }] }, sortBy: "startTime", sortDirection: "asc", limit: 1 })).items;
      expect((await sdkFailure(ownClient.traces.get(ownSlug, alpha.traceId))).statusCode).toBe(500);

      for (const sortBy of ["startTime", "endTime", "durationNs", "tokensTotal", "costTotalMicrocents"] as const) {
        for (const sortDirection of ["asc", "desc"] as const) {
          const first = await ownClient.traces.list(ownSlug, { sortBy, sortDirection, limit: 2 });
          const second = await ownClient.traces.list(ownSlug, { sortBy, sortDirection, limit: 2, cursor: first.nextCursor! });
          expect(first.items.length + second.items.length).toBe(4);
        }
      }
      const filters = {
        status: [{ op: "eq", value: "ok" }],
        name: [{ op: "neq", value: "report" }],
        tags: [{ op: "contains", value: "pro" }],
        models: [{ op: "in", value: ["gpt-4o"] }],
        tools: [{ op: "eq", value: "search_docs" }],
        definedTools: [{ op: "eq", value: "lookup_order" }],
        duration: [{ op: "gtePercentile", value: 25 }],
        cost: [{ op: "gte", value: 1 }],
        cacheHitRate: [{ op: "gt", value: 0 }],
        startTime: [{ op: "gte", value: iso(starts.alpha) }],
        endTime: [{ op: "lte", value: iso(starts.delta + 60_000) }],
        "metadata.env": [{ op: "eq", value: "prod" }],
        "score.passed": [{ op: "neq", value: false }],
      };
      const filtered = await ownClient.traces.list(ownSlug, { filters: filters as never, limit: 1 });
      expect(filtered.items.map((item) => item.rootSpanName)).toEqual(["checkout"]);
      const analytics = await ownClient.traces.analytics(ownSlug, { fromIso: iso(base - hour), toIso: iso(base + 5 * hour) });
      expect(analytics.traces.total).toBe(4);
      expect((await ownClient.traces.listSpans(ownSlug, alpha.traceId)).items).toHaveLength(3);
    } finally {
      await own.stop();
    }
  }, 60_000);
});
