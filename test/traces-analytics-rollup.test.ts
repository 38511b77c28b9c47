import { beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import type { LatitudeClient } from "@latitude-data/sdk";
import type { Vigil } from "../src/server";
import type { SpanRow } from "../src/ingest/row";
import { insertSpans, newTraceId, spanRow, tenantOf, type Tenant } from "./fixtures/spans";
import { bootstrapAccount, sharedVigil } from "./helpers";

setDefaultTimeout(60_000);

// The hourly analytics roll-up (sql/clickhouse/016_analytics_hourly.sql) and the start-time projection
// of the trace roll-up (015): what analytics and the trace list read instead of scanning a project.

let vigil: Vigil;
const hour = 3600_000;
// Ten days ago at 00:00 UTC: hours of a past day, whole and partial.
const day = Math.floor(Date.now() / (24 * hour)) * 24 * hour - 10 * 24 * hour;
const iso = (ms: number) => new Date(ms).toISOString();

async function project(): Promise<{ client: LatitudeClient; slug: string; tenant: Tenant }> {
  const created = await bootstrapAccount(vigil.url);
  const tenant = await tenantOf(vigil.ctx, created.account.apiKey, created.account.projectSlug);
  return { client: created.client, slug: created.account.projectSlug, tenant };
}

/** Rows of the hourly roll-up of a project, merged. */
async function hourlyTotals(tenant: Tenant): Promise<{ spans: number; tokens: number; cost: number }> {
  const { ch } = vigil.ctx;
  const result = await ch.client.query({
    query: `SELECT sum(spans) AS spans, sum(tokens) AS tokens, sum(cost_total_microcents) AS cost FROM ${ch.database}.analytics_hourly
      WHERE organization_id = {org:String} AND project_id = {project:String}`,
    query_params: { org: tenant.organizationId, project: tenant.projectId },
    format: "JSONEachRow",
  });
  const [row] = await result.json<{ spans: number; tokens: number; cost: number }>();
  return row;
}

/**
 * Inserts rows into `spans` as the write-ahead log's inserts do: with a deduplication token that its
 * materialized views' blocks inherit. Settings in the statement: on chdb a request's settings would
 * stay on the session for later inserts.
 */
function insertWithToken(rows: SpanRow[], token: string): Promise<unknown> {
  const { ch } = vigil.ctx;
  return ch.client.command({
    query: `INSERT INTO ${ch.database}.spans SETTINGS insert_deduplicate = 1, insert_deduplication_token = '${token}', deduplicate_blocks_in_dependent_materialized_views = 1
      FORMAT JSONEachRow\n${rows.map((row) => JSON.stringify(row)).join("\n")}`,
  });
}

const chat = (tenant: Tenant, startMs: number, tokens: number, ttftMs: number) =>
  spanRow(tenant, {
    trace_id: newTraceId(),
    startMs,
    durationMs: 1000,
    operation: "chat",
    tokens_input: tokens,
    cost_total_microcents: tokens * 1_000_000,
    time_to_first_token_ns: ttftMs * 1_000_000,
  });

beforeAll(async () => {
  vigil = await sharedVigil();
});

describe("hourly analytics roll-up", () => {
  test("whole hours come from the roll-up and partial hours at the edges from spans, with the same totals and medians", async () => {
    const { client, slug, tenant } = await project();
    const range = { fromIso: iso(day + hour / 2), toIso: iso(day + 3 * hour) };
    await insertSpans(vigil.ctx, [
      chat(tenant, day + 10 * 60_000, 1, 900), // before the range, in its first (partial) hour
      chat(tenant, day + 40 * 60_000, 10, 100), // in the partial first hour
      chat(tenant, day + 90 * 60_000, 100, 300), // whole hour
      chat(tenant, day + 150 * 60_000, 1000, 500), // whole hour
      chat(tenant, day + 3 * hour, 10_000, 700), // exactly at the end: in (the range includes its end)
      chat(tenant, day + 3 * hour + 60_000, 100_000, 800), // after the range, in the end's hour
    ]);
    expect(await hourlyTotals(tenant)).toEqual({ spans: 6, tokens: 111_111, cost: 111_111_000_000 });

    const analytics = await client.traces.analytics(slug, range);
    expect(analytics.spans.total).toBe(4);
    expect(analytics.tokens.total).toBe(11_110);
    expect(analytics.cost.total).toBe(111.1);
    // Time to first token 100, 300, 500, 700 ms: the exact median of four is the upper middle one.
    expect(analytics.timeToFirstToken.median).toBe(0.5);
    expect(analytics.traces.total).toBe(4);
    expect(analytics.spans.buckets.map((bucket) => bucket.value)).toEqual([4]);
  });

  test("a span insert repeated with the same deduplication token counts once in the roll-up", async () => {
    const { client, slug, tenant } = await project();
    const rows = [chat(tenant, day + 5 * hour, 7, 200), chat(tenant, day + 5 * hour + 60_000, 9, 400)];
    const insert = () => insertWithToken(rows, `analytics-${tenant.projectId}`);
    await insert();
    await insert();
    expect(await hourlyTotals(tenant)).toEqual({ spans: 2, tokens: 16, cost: 16_000_000 });
    const analytics = await client.traces.analytics(slug, { fromIso: iso(day + 4 * hour), toIso: iso(day + 6 * hour) });
    expect({ spans: analytics.spans.total, tokens: analytics.tokens.total, traces: analytics.traces.total }).toEqual({ spans: 2, tokens: 16, traces: 2 });
  });

  test("spans committed without their roll-up rows (a crash between the two) are counted once when the insert is replayed", async () => {
    const { client, slug, tenant } = await project();
    const rows = [chat(tenant, day + 8 * hour, 5, 100), chat(tenant, day + 8 * hour + 60_000, 6, 200), chat(tenant, day + 9 * hour, 8, 300)];
    const { ch } = vigil.ctx;
    const insert = () => insertWithToken(rows, `crash-${tenant.projectId}`);
    // The spans part commits while the view writes nothing: the state a crash between them leaves.
    await ch.client.command({ query: `DETACH TABLE ${ch.database}.analytics_hourly_mv` });
    try {
      await insert();
    } finally {
      await ch.client.command({ query: `ATTACH TABLE ${ch.database}.analytics_hourly_mv` });
    }
    expect(await hourlyTotals(tenant)).toEqual({ spans: 0, tokens: 0, cost: 0 });
    // The replay: `spans` skips the block it holds, the view writes the rows it missed, once.
    await insert();
    await insert();
    expect(await hourlyTotals(tenant)).toEqual({ spans: 3, tokens: 19, cost: 19_000_000 });
    const counted = await ch.client.query({
      query: `SELECT count() AS spans FROM ${ch.database}.spans WHERE organization_id = {org:String} AND project_id = {project:String}`,
      query_params: { org: tenant.organizationId, project: tenant.projectId },
      format: "JSONEachRow",
    });
    expect(await counted.json()).toEqual([{ spans: 3 }]);
    const analytics = await client.traces.analytics(slug, { fromIso: iso(day + 7 * hour), toIso: iso(day + 10 * hour) });
    expect({ spans: analytics.spans.total, tokens: analytics.tokens.total, median: analytics.timeToFirstToken.median }).toEqual({ spans: 3, tokens: 19, median: 0.2 });
  });

  test("a trace counts at its earliest span even when that span arrives after the trace's spans in the range", async () => {
    const { client, slug, tenant } = await project();
    const trace_id = newTraceId();
    await insertSpans(vigil.ctx, [spanRow(tenant, { trace_id, startMs: day + 14 * hour, durationMs: 1000 })]);
    await insertSpans(vigil.ctx, [spanRow(tenant, { trace_id, startMs: day + 11 * hour, durationMs: 1000 })]);
    const inRange = await client.traces.analytics(slug, { fromIso: iso(day + 12 * hour), toIso: iso(day + 16 * hour) });
    expect(inRange.traces.total).toBe(0);
    expect(inRange.spans.total).toBe(1);
    const earlier = await client.traces.analytics(slug, { fromIso: iso(day + 10 * hour), toIso: iso(day + 12 * hour) });
    expect(earlier.traces.total).toBe(1);
    expect(earlier.duration.median).toBe(3 * 3600 + 1);
  });
});

describe("start-time projection of the trace roll-up", () => {
  test("is written with every insert into the roll-up, row for row", async () => {
    const { tenant } = await project();
    await insertSpans(vigil.ctx, [3, 1, 2].map((h) => spanRow(tenant, { trace_id: newTraceId(), startMs: day + 20 * hour + h * 60_000 })));
    const { ch } = vigil.ctx;
    // Other tests insert and merges run between the two sums: a missing projection stays unequal, a race does not.
    const sums = async () => {
      const result = await ch.client.query({
        query: `SELECT
            (SELECT sum(rows) FROM system.projection_parts WHERE database = {database:String} AND table = 'traces' AND name = 'by_start_time_with_first_token' AND active) AS projected,
            (SELECT sum(rows) FROM system.parts WHERE database = {database:String} AND table = 'traces' AND active) AS stored`,
        query_params: { database: ch.database },
        format: "JSONEachRow",
      });
      const [{ projected, stored }] = await result.json<{ projected: number; stored: number }>();
      return { projected: Number(projected), stored: Number(stored) };
    };
    let counted = await sums();
    for (let attempt = 0; attempt < 10 && counted.projected !== counted.stored; attempt++) counted = await Bun.sleep(200).then(sums);
    expect(counted.stored).toBeGreaterThanOrEqual(3);
    expect(counted.projected).toBe(counted.stored);
  });
});
