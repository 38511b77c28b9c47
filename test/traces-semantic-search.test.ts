import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import type { LatitudeClient } from "@latitude-data/sdk";
import type { Vigil } from "../src/server";
import { insertSpans, newTraceId, spanRow, tenantOf, type Tenant } from "./fixtures/spans";
import { bootstrapAccount, startTestVigil } from "./helpers";

setDefaultTimeout(60_000);

/**
 * A local OpenAI-compatible embeddings endpoint whose vectors put synonyms on one axis, so semantic
 * matches differ visibly from word matches.
 */
const concepts = [
  ["car", "cars", "automobile", "vehicle", "engine"],
  ["weather", "forecast", "rain", "sunny"],
  ["refund", "reimbursement", "money", "back"],
];
const dimensions = 16;

function embed(text: string): number[] {
  const vector = new Array<number>(dimensions).fill(0);
  for (const word of text.toLowerCase().match(/[a-z]+/g) ?? []) {
    const concept = concepts.findIndex((words) => words.includes(word));
    if (concept >= 0) vector[concept] += 1;
    else vector[3 + ([...word].reduce((hash, char) => hash * 31 + char.charCodeAt(0), 7) % (dimensions - 3))] += 0.2;
  }
  const norm = Math.hypot(...vector) || 1;
  return vector.map((x) => x / norm);
}

const embedded: string[] = [];
let failing = false;
const embeddingsServer = Bun.serve({
  port: 0,
  hostname: "127.0.0.1",
  async fetch(request) {
    const url = new URL(request.url);
    if (request.method !== "POST" || url.pathname !== "/v1/embeddings") return new Response("not found", { status: 404 });
    if (request.headers.get("authorization") !== "Bearer test-key") return new Response("unauthorized", { status: 401 });
    if (failing) return new Response("upstream down", { status: 503 });
    const body = (await request.json()) as { model: string; input: string[] };
    if (body.model !== "fake-embed") return new Response("unknown model", { status: 400 });
    embedded.push(...body.input);
    return Response.json({ object: "list", model: body.model, data: body.input.map((input, index) => ({ object: "embedding", index, embedding: embed(input) })) });
  },
});

let vigil: Vigil;
let client: LatitudeClient;
let slug: string;
let tenant: Tenant;
const base = Date.now() - 3600_000;
const traces = { car: newTraceId(), weather: newTraceId(), refund: newTraceId() };
const nameOf = (traceId: string) => (Object.keys(traces) as (keyof typeof traces)[]).find((name) => traces[name] === traceId);

async function embeddedCount(): Promise<number> {
  const result = await vigil.ctx.ch.client.query({
    query: `SELECT count() AS n FROM ${vigil.ctx.ch.database}.span_embeddings FINAL WHERE project_id = {project:String}`,
    query_params: { project: tenant.projectId },
    format: "JSONEachRow",
  });
  return Number((await result.json<{ n: number }>())[0].n);
}

async function waitForEmbeddings(count: number) {
  const deadline = Date.now() + 20_000;
  while ((await embeddedCount()) < count) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${count} embedded spans`);
    await Bun.sleep(50);
  }
}

beforeAll(async () => {
  vigil = await startTestVigil({ EMBEDDINGS_BASE_URL: `http://127.0.0.1:${embeddingsServer.port}/v1`, EMBEDDINGS_API_KEY: "test-key", EMBEDDINGS_MODEL: "fake-embed" });
  const created = await bootstrapAccount(vigil.url, { projectName: "Semantic" });
  client = created.client;
  slug = created.account.projectSlug;
  tenant = await tenantOf(vigil.ctx, created.account.apiKey, slug);
  const chat = (trace_id: string, at: number, text: string, tags: string[] = []) =>
    spanRow(tenant, { trace_id, startMs: base + at, operation: "chat", message_text: text, tags });
  await insertSpans(vigil.ctx, [
    chat(traces.car, 0, "My car engine will not start this morning", ["garage"]),
    chat(traces.weather, 1000, "Will it rain tomorrow in Lisbon?"),
    chat(traces.refund, 2000, "I would like my money back for the broken kettle"),
    spanRow(tenant, { trace_id: traces.refund, startMs: base + 2100, name: "no messages" }),
  ]);
  await waitForEmbeddings(3);
}, 60_000);

afterAll(async () => {
  await vigil.stop();
  embeddingsServer.stop(true);
});

describe("semantic search", () => {
  test("finds traces by meaning, not only by their words", async () => {
    const page = await client.traces.list(slug, { query: "automobile", sortBy: "relevance" });
    expect(page.items.map((item) => nameOf(item.traceId))).toEqual(["car"]);
    const refund = await client.traces.list(slug, { query: "reimbursement please" });
    expect(refund.items.map((item) => nameOf(item.traceId))).toEqual(["refund"]);
  });

  test("the query is ANDed with filters", async () => {
    const kept = await client.traces.list(slug, { query: "vehicle", filters: { tags: [{ op: "eq", value: "garage" }] } });
    expect(kept.items.map((item) => nameOf(item.traceId))).toEqual(["car"]);
    const excluded = await client.traces.list(slug, { query: "vehicle", filters: { tags: [{ op: "neq", value: "garage" }] } });
    expect(excluded.items).toEqual([]);
  });

  test("spans are embedded once, shortly after ingest; a late span joins its trace's matches", async () => {
    expect(embedded.filter((input) => input.includes("kettle"))).toHaveLength(1);
    await insertSpans(vigil.ctx, [spanRow(tenant, { trace_id: traces.weather, startMs: base + 1500, operation: "chat", message_text: "Can I drive my car in the rain?" })]);
    await waitForEmbeddings(4);
    const page = await client.traces.list(slug, { query: "automobile", sortBy: "relevance" });
    expect(page.items.map((item) => nameOf(item.traceId))).toEqual(["car", "weather"]);
    const texts = embedded.filter((input) => input !== "automobile" && input !== "reimbursement please" && input !== "vehicle");
    expect(texts).toHaveLength(new Set(texts).size);
    expect(texts).toHaveLength(4);
  }, 30_000);

  test("relevance pages with a cursor; a span embedded after the first page stays out of the walk", async () => {
    // After the previous test, "automobile" matches car (its engine) best, then weather (a car in the rain).
    const body = { query: "automobile", sortBy: "relevance" } as const;
    const first = await client.traces.list(slug, { ...body, limit: 1 });
    expect(first.items.map((item) => nameOf(item.traceId))).toEqual(["car"]);
    expect(first.hasMore).toBe(true);
    // A refund span about a car would rank between the two.
    await insertSpans(vigil.ctx, [spanRow(tenant, { trace_id: traces.refund, startMs: base + 2200, operation: "chat", message_text: "car refund" })]);
    await waitForEmbeddings(5);
    const second = await client.traces.list(slug, { ...body, limit: 1, cursor: first.nextCursor! });
    expect(second.items.map((item) => nameOf(item.traceId))).toEqual(["weather"]);
    expect(second.hasMore).toBe(false);
    expect(second.nextCursor).toBeNull();
    const fresh = await client.traces.list(slug, body);
    expect(fresh.items.map((item) => nameOf(item.traceId))).toEqual(["car", "refund", "weather"]);
  }, 30_000);

  test("when the embeddings endpoint fails, search answers with full-text matching", async () => {
    failing = true;
    try {
      const page = await client.traces.list(slug, { query: "kettle" });
      expect(page.items.map((item) => nameOf(item.traceId))).toEqual(["refund"]);
    } finally {
      failing = false;
    }
  });
});
