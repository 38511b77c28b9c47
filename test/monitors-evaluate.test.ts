import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import type { LatitudeClient } from "@latitude-data/sdk";
import { createLogger } from "../src/lib/log";
import { MonitorEvaluator } from "../src/modules/monitors/evaluate";
import { Measurer } from "../src/modules/monitors/measure";
import { createSignalSource } from "../src/modules/monitors/signal-source";
import { TraceSearch } from "../src/modules/traces/search";
import type { Vigil } from "../src/server";
import { insertSpans, newTraceId, spanRow, tenantOf, type Tenant } from "./fixtures/spans";
import { bootstrapAccount, startTestVigil } from "./helpers";

setDefaultTimeout(120_000);

/**
 * Monitors evaluated over spans stored in ClickHouse, at chosen instants: scheduled evaluation is
 * off (MONITOR_INTERVAL_SECONDS=0) so only the test's evaluator runs.
 */

const hour = 3600_000;
let vigil: Vigil;
let evaluator: MonitorEvaluator;

beforeAll(async () => {
  vigil = await startTestVigil({ MONITOR_INTERVAL_SECONDS: "0" });
  const log = createLogger("silent");
  evaluator = new MonitorEvaluator(vigil.ctx.sql, new Measurer(vigil.ctx.ch, new TraceSearch(null, log)), createSignalSource(vigil.ctx), 60, log);
});
afterAll(() => vigil.stop());

async function account() {
  const { account, client } = await bootstrapAccount(vigil.url);
  const tenant = await tenantOf(vigil.ctx, account.apiKey, account.projectSlug);
  return { client, project: account.projectSlug, tenant };
}

/** One trace of one root span. */
const trace = (tenant: Tenant, at: number, fields: Parameters<typeof spanRow>[1] extends infer T ? Partial<T> : never = {}) =>
  spanRow(tenant, { trace_id: newTraceId(), startMs: at, durationMs: 100, ...fields });

/** Evaluates the project at `now`, making every monitor due first. */
async function evaluate(tenant: Tenant, now: number) {
  await vigil.ctx.sql`UPDATE monitors SET next_evaluation_at = ${new Date(now)} WHERE project_id = ${tenant.projectId}`;
  return evaluator.evaluateProject(tenant.projectId, new Date(now));
}

async function incidentsOf(client: LatitudeClient, project: string, monitorSlug: string) {
  return (await client.monitors.listIncidents(project, monitorSlug, { limit: 100 })).items;
}

describe("match monitors", () => {
  test("an incident per new matching trace, once; a muted monitor still opens them, silently", async () => {
    const { client, project, tenant } = await account();
    const search = await client.savedSearches.create(project, { name: "errors", filters: { status: [{ op: "eq", value: "error" }] } });
    const monitor = await client.monitors.create(project, { body: { trigger: "match", name: "Errors", target: { type: "savedSearch", id: search.id }, severity: "high" } });
    const muted = await client.monitors.create(project, { body: { trigger: "match", name: "Errors muted", target: { type: "savedSearch", id: search.id }, severity: "low" } });
    await client.monitors.mute(project, muted.slug);
    const t0 = Date.now();
    const failing = [trace(tenant, t0, { status_code: "error" }), trace(tenant, t0 + 10, { status_code: "error" })];
    await insertSpans(vigil.ctx, [...failing, trace(tenant, t0 + 20)]);
    await evaluate(tenant, t0 + 60_000);
    const opened = await incidentsOf(client, project, monitor.slug);
    expect(opened.map((incident) => incident.sourceId)).toEqual([monitor.id, monitor.id]);
    expect(opened.every((incident) => incident.endedAt === incident.startedAt && incident.condition === null && incident.severity === "high")).toBe(true);
    // Evaluating again, even re-reading the same traces, opens nothing new.
    await vigil.ctx.sql`UPDATE monitors SET state = '{}' WHERE id = ${monitor.id}`;
    await evaluate(tenant, t0 + 120_000);
    expect(await incidentsOf(client, project, monitor.slug)).toHaveLength(2);
    await insertSpans(vigil.ctx, [trace(tenant, t0 + 30_000, { status_code: "error" })]);
    await evaluate(tenant, t0 + 180_000);
    expect(await incidentsOf(client, project, monitor.slug)).toHaveLength(3);
    const [row] = await vigil.ctx.sql<{ silent: number }[]>`SELECT count(*)::int AS silent FROM incidents WHERE source_id = ${muted.id} AND open_notice = 'silent'`;
    expect(row.silent).toBe(3);
  });

  test("tool monitors watch spans of that tool", async () => {
    const { client, project, tenant } = await account();
    const monitor = await client.monitors.create(project, { body: { trigger: "match", name: "search tool failing", target: { type: "tool", id: "search", filterSet: { status: [{ op: "eq", value: "error" }] } }, severity: "medium" } });
    const t0 = Date.now();
    const traceId = newTraceId();
    await insertSpans(vigil.ctx, [
      spanRow(tenant, { trace_id: traceId, startMs: t0, operation: "execute_tool", tool_name: "search", status_code: "error" }),
      spanRow(tenant, { trace_id: traceId, startMs: t0 + 5, operation: "execute_tool", tool_name: "search" }),
      spanRow(tenant, { trace_id: traceId, startMs: t0 + 9, operation: "execute_tool", tool_name: "fetch", status_code: "error" }),
    ]);
    await evaluate(tenant, t0 + 60_000);
    expect(await incidentsOf(client, project, monitor.slug)).toHaveLength(1);
  });
});

describe("threshold monitors", () => {
  test("absolute, above and below: open while crossed, close when back", async () => {
    const { client, project, tenant } = await account();
    const busy = await client.monitors.create(project, {
      body: { trigger: "threshold", name: "busy user", target: { type: "user", id: "u-busy" }, severity: "medium", condition: { trigger: "threshold", metric: { kind: "count" }, threshold: { mode: "absolute", value: 2 }, direction: "above" } },
    });
    const quiet = await client.monitors.create(project, {
      body: { trigger: "threshold", name: "quiet user", target: { type: "user", id: "u-quiet" }, severity: "low", condition: { trigger: "threshold", metric: { kind: "count" }, threshold: { mode: "absolute", value: 1 }, direction: "below" } },
    });
    const slow = await client.monitors.create(project, {
      body: { trigger: "threshold", name: "slow", target: { type: "user", id: "u-busy" }, severity: "low", condition: { trigger: "threshold", metric: { kind: "max", field: "duration" }, threshold: { mode: "absolute", value: 1500 } } },
    });
    const t0 = Date.now();
    await insertSpans(vigil.ctx, [0, 1, 2].map((i) => trace(tenant, t0 + i, { user_id: "u-busy", duration_ns: 0, durationMs: i === 2 ? 2000 : 100 })));
    await evaluate(tenant, t0 + 60_000);
    const [busyOpen] = await incidentsOf(client, project, busy.slug);
    expect(busyOpen).toMatchObject({ endedAt: null, condition: { trigger: "threshold", threshold: { mode: "absolute", value: 2 } } });
    const [quietOpen] = await incidentsOf(client, project, quiet.slug);
    expect(quietOpen.endedAt).toBeNull();
    expect((await incidentsOf(client, project, slow.slug))[0].endedAt).toBeNull();

    await insertSpans(vigil.ctx, [trace(tenant, t0 + 120_000, { user_id: "u-quiet" })]);
    await evaluate(tenant, t0 + 180_000);
    expect((await incidentsOf(client, project, quiet.slug))[0].endedAt).not.toBeNull();
    expect((await incidentsOf(client, project, busy.slug))[0].endedAt).toBeNull();
    // Two hours later the busy hour has passed.
    await evaluate(tenant, t0 + 2 * hour);
    const [busyClosed] = await incidentsOf(client, project, busy.slug);
    expect(busyClosed.endedAt).not.toBeNull();
    expect(await incidentsOf(client, project, busy.slug)).toHaveLength(1);
  });

  test("multiplier over the previous period and over a rolling average, both directions", async () => {
    const { client, project, tenant } = await account();
    const create = (name: string, factor: number, kind: "period" | "average", direction: "above" | "below", hours: number) =>
      client.monitors.create(project, {
        body: {
          trigger: "threshold",
          name,
          target: { type: "user", id: "u-m" },
          severity: "high",
          condition: { trigger: "threshold", metric: { kind: "count" }, threshold: { mode: "multiplier", factor, baseline: { kind, lookback: { unit: "hours", hours } } }, direction },
        },
      });
    const doubled = await create("doubled", 2, "period", "above", 1);
    const halved = await create("halved", 0.5, "period", "below", 1);
    const overAverage = await create("over average", 3, "average", "above", 6);
    const t0 = Date.now();
    const now = t0 + 60_000;
    // Previous hour: 2 traces; last hour: 5. Six-hour average: 7/6 per hour.
    await insertSpans(vigil.ctx, [
      ...[0, 1].map((i) => trace(tenant, now - 90 * 60_000 + i, { user_id: "u-m" })),
      ...[0, 1, 2, 3, 4].map((i) => trace(tenant, now - 20 * 60_000 + i, { user_id: "u-m" })),
    ]);
    await evaluate(tenant, now);
    expect(await incidentsOf(client, project, doubled.slug)).toHaveLength(1); // 5 > 2·2
    expect(await incidentsOf(client, project, halved.slug)).toHaveLength(0); // 5 is not below 0.5·2
    expect(await incidentsOf(client, project, overAverage.slug)).toHaveLength(1); // 5 > 3·7/6
    // An hour later: last hour 0, previous hour 5: halved opens, doubled closes.
    await evaluate(tenant, now + hour);
    expect((await incidentsOf(client, project, halved.slug))[0]?.endedAt).toBeNull();
    expect((await incidentsOf(client, project, doubled.slug))[0].endedAt).not.toBeNull();
  });
});

describe("seasonal monitors", () => {
  /** Two weeks and a bit of 2 traces an hour for user u-s, then `spike` traces in each of the last 6 hours. */
  async function history(tenant: Tenant, now: number, spike: number) {
    const rows = [];
    for (let h = 16 * 24; h >= 1; h--) {
      const count = h <= 6 ? spike : 2;
      // Spread over the hour, so an hour-long window sliding a few minutes keeps about as many.
      for (let i = 0; i < count; i++) rows.push(trace(tenant, now - h * hour + 1000 + Math.floor((i * hour) / count), { user_id: "u-s" }));
    }
    await insertSpans(vigil.ctx, rows);
  }

  test("escalating: enters after holding for its window, exits after 30 calm minutes", async () => {
    const { client, project, tenant } = await account();
    const monitor = await client.monitors.create(project, {
      body: { trigger: "escalating", name: "surge", target: { type: "user", id: "u-s" }, severity: "urgent", condition: { trigger: "escalating", metric: { kind: "count" }, sensitivity: 3, window: { minutes: 5 } } },
    });
    const expected = await client.monitors.create(project, {
      body: { trigger: "threshold", name: "above expected", target: { type: "user", id: "u-s" }, severity: "low", condition: { trigger: "threshold", metric: { kind: "count" }, threshold: { mode: "expected", sensitivity: 3 } } },
    });
    const strict = await client.monitors.create(project, {
      body: { trigger: "escalating", name: "surge strict", target: { type: "user", id: "u-s" }, severity: "urgent", condition: { trigger: "escalating", metric: { kind: "count" }, sensitivity: 6, window: { minutes: 5 } } },
    });
    const now = Date.now();
    // Baseline 2/h (σ_eff = √2): about 10/h beats 2 + 3·√2 = 6.2 (k = 3, two weeks) but not 2 + 6·√2 = 10.5 (k = 6).
    await history(tenant, now, 10);
    await evaluate(tenant, now);
    expect(await incidentsOf(client, project, monitor.slug)).toHaveLength(0);
    expect(await incidentsOf(client, project, expected.slug)).toHaveLength(1);
    await evaluate(tenant, now + 4 * 60_000);
    expect(await incidentsOf(client, project, monitor.slug)).toHaveLength(0);
    await evaluate(tenant, now + 5 * 60_000);
    const [opened] = await incidentsOf(client, project, monitor.slug);
    expect(opened).toMatchObject({ endedAt: null, severity: "urgent", condition: { trigger: "escalating", sensitivity: 3, window: { minutes: 5 } } });
    expect(await incidentsOf(client, project, strict.slug)).toHaveLength(0);
    // Eight hours on, both windows are back to the baseline: calm from then, exit 30 minutes later.
    await evaluate(tenant, now + 8 * hour);
    expect((await incidentsOf(client, project, monitor.slug))[0].endedAt).toBeNull();
    await evaluate(tenant, now + 8 * hour + 30 * 60_000);
    expect((await incidentsOf(client, project, monitor.slug))[0].endedAt).not.toBeNull();
    expect((await incidentsOf(client, project, expected.slug))[0].endedAt).not.toBeNull();
  });

  test("escalating with an absolute threshold holds it for the window", async () => {
    const { client, project, tenant } = await account();
    const monitor = await client.monitors.create(project, {
      body: {
        trigger: "escalating",
        name: "errors sustained",
        target: { type: "user", id: "u-e" },
        severity: "high",
        condition: { trigger: "escalating", metric: { kind: "errorRate" }, threshold: { mode: "absolute", value: 0.5 }, window: { minutes: 10 } },
      },
    });
    const t0 = Date.now();
    const rows = [];
    for (let m = 0; m < 30; m++) rows.push(trace(tenant, t0 + m * 60_000, { user_id: "u-e", status_code: m < 20 ? "error" : "unset" }));
    await insertSpans(vigil.ctx, rows);
    await evaluate(tenant, t0 + 5 * 60_000);
    await evaluate(tenant, t0 + 10 * 60_000);
    expect(await incidentsOf(client, project, monitor.slug)).toHaveLength(0);
    await evaluate(tenant, t0 + 15 * 60_000);
    expect(await incidentsOf(client, project, monitor.slug)).toHaveLength(1);
    // Minutes 20–30 have no errors: the last 10 minutes fall below 0.5 and it closes.
    await evaluate(tenant, t0 + 30 * 60_000);
    expect((await incidentsOf(client, project, monitor.slug))[0].endedAt).not.toBeNull();
  });
});

test("two processes sharing the stores evaluate each monitor once and open each incident once", async () => {
  const { client, project, tenant } = await account();
  const other = await startTestVigil({
    MONITOR_INTERVAL_SECONDS: "0",
    DATABASE_URL: vigil.ctx.config.databaseUrl!,
    CLICKHOUSE_DATABASE: vigil.ctx.config.clickhouse.database,
  });
  try {
    const log = createLogger("silent");
    const second = new MonitorEvaluator(other.ctx.sql, new Measurer(other.ctx.ch, new TraceSearch(null, log)), createSignalSource(other.ctx), 60, log);
    const monitors = [];
    for (let i = 0; i < 5; i++) {
      monitors.push(await client.monitors.create(project, { body: { trigger: "match", name: `m${i}`, target: { type: "user", id: "u-2" }, severity: "low" } }));
    }
    const t0 = Date.now();
    await insertSpans(vigil.ctx, [0, 1, 2].map((i) => trace(tenant, t0 + i, { user_id: "u-2" })));
    const now = new Date(t0 + 60_000);
    await vigil.ctx.sql`UPDATE monitors SET next_evaluation_at = ${now} WHERE project_id = ${tenant.projectId}`;
    const [a, b] = await Promise.all([evaluator.evaluateProject(tenant.projectId, now), second.evaluateProject(tenant.projectId, now)]);
    // Every monitor of the project, each evaluated by one of the two.
    const [{ count }] = await vigil.ctx.sql<{ count: number }[]>`SELECT count(*)::int AS count FROM monitors WHERE project_id = ${tenant.projectId}`;
    expect(a.monitors + b.monitors).toBe(count);
    expect(Math.min(a.monitors, b.monitors)).toBe(0);
    // Overlapping evaluations (the claim bypassed by resetting it) still open each incident once.
    await vigil.ctx.sql`UPDATE monitors SET next_evaluation_at = ${now}, state = '{}' WHERE project_id = ${tenant.projectId}`;
    await Promise.all([evaluator.evaluateProject(tenant.projectId, now), second.evaluateProject(tenant.projectId, now)]);
    for (const monitor of monitors) expect(await incidentsOf(client, project, monitor.slug)).toHaveLength(3);
  } finally {
    await other.stop();
  }
});
