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

/**
 * Monitors over the sessions stream: items are sessions (the `sessions` roll-up joined to their
 * traces), so counts, rates and durations are per session, and a match opens one incident per
 * session however many of its traces match. Every monitor here would read other values, and open
 * or close at other times, over the traces of the same spans.
 */
const minute = 60_000;

/** One trace of one root span in a session of the user. */
const sessionTrace = (tenant: Tenant, at: number, session: string, fields: { error?: boolean; user?: string; cacheRead?: number; input?: number } = {}) =>
  spanRow(tenant, {
    trace_id: newTraceId(),
    startMs: at,
    durationMs: 100,
    session_id: session,
    user_id: fields.user ?? "u-sessions",
    status_code: fields.error ? "error" : "ok",
    tokens_input: fields.input ?? 0,
    tokens_cache_read: fields.cacheRead ?? 0,
  });

/** The measured value an open threshold incident recorded, and the item of each match incident. */
async function detailsOf(monitorId: string) {
  return vigil.ctx.sql<{ value: number | null; item_key: string | null; trace_id: string | null }[]>`
    SELECT (details->>'value')::float8 AS value, item_key, details->>'traceId' AS trace_id FROM incidents WHERE source_id = ${monitorId} ORDER BY item_key, started_at`;
}

describe("sessions stream", () => {
  test("threshold monitors measure sessions: count, error rate and duration per session, opening and closing on them", async () => {
    const { client, project, tenant } = await account();
    const user = { type: "user" as const, id: "u-sessions", stream: "sessions" as const };
    const few = await client.monitors.create(project, {
      body: { trigger: "threshold", name: "few sessions", target: user, severity: "low", condition: { trigger: "threshold", metric: { kind: "count" }, threshold: { mode: "absolute", value: 3 }, direction: "below" } },
    });
    const failing = await client.monitors.create(project, {
      body: { trigger: "threshold", name: "failing sessions", target: user, severity: "high", condition: { trigger: "threshold", metric: { kind: "errorRate" }, threshold: { mode: "absolute", value: 0.9 } } },
    });
    const session = { type: "session" as const, id: "s-a" };
    const long = await client.monitors.create(project, {
      body: { trigger: "threshold", name: "long session", target: session, severity: "medium", condition: { trigger: "threshold", metric: { kind: "avg", field: "duration" }, threshold: { mode: "absolute", value: 10 * minute } } },
    });
    const cached = await client.monitors.create(project, {
      body: { trigger: "threshold", name: "cache", target: user, severity: "low", condition: { trigger: "threshold", metric: { kind: "cacheHitRate" }, threshold: { mode: "absolute", value: 0.1 } } },
    });
    const typical = await client.monitors.create(project, {
      body: { trigger: "threshold", name: "typical session", target: user, severity: "low", condition: { trigger: "threshold", metric: { kind: "median", field: "duration" }, threshold: { mode: "absolute", value: 10 * minute } } },
    });
    const tokens = await client.monitors.create(project, {
      body: { trigger: "threshold", name: "tokens", target: user, severity: "low", condition: { trigger: "threshold", metric: { kind: "sum", field: "tokens" }, threshold: { mode: "absolute", value: 100 } } },
    });
    expect((await client.monitors.get(project, long.slug)).target).toMatchObject({ type: "session", stream: "sessions" });
    expect((await client.monitors.get(project, few.slug)).target).toMatchObject({ type: "user", stream: "sessions" });

    const t0 = Date.now() - 30 * minute;
    // Session s-a: three traces over 20 minutes, one failing; s-b: one failing trace. Traces: 4, 2 failing.
    await insertSpans(vigil.ctx, [
      sessionTrace(tenant, t0, "s-a", { input: 300, cacheRead: 100 }),
      sessionTrace(tenant, t0 + 10 * minute, "s-a", { error: true }),
      sessionTrace(tenant, t0 + 20 * minute, "s-a"),
      sessionTrace(tenant, t0 + 5 * minute, "s-b", { error: true, input: 100 }),
      sessionTrace(tenant, t0 + 6 * minute, "s-other", { user: "someone else" }),
    ]);
    const now = t0 + 25 * minute;
    await evaluate(tenant, now);
    // 2 sessions < 3 (the traces stream counts 4); both sessions failed (traces: 2 of 4);
    // s-a lasted 20 minutes (its traces 100 ms each); cache: 100 of 500 input tokens.
    const [fewOpen] = await incidentsOf(client, project, few.slug);
    expect(fewOpen?.endedAt).toBeNull();
    expect((await detailsOf(few.id))[0]!.value).toBe(2);
    expect((await incidentsOf(client, project, failing.slug))[0]?.endedAt).toBeNull();
    expect((await detailsOf(failing.id))[0]!.value).toBe(1);
    expect((await incidentsOf(client, project, long.slug))[0]?.endedAt).toBeNull();
    expect((await detailsOf(long.id))[0]!.value).toBeCloseTo(20 * minute + 100, -1);
    expect((await detailsOf(cached.id))[0]!.value).toBeCloseTo(0.2, 5);
    // The median of the two sessions' durations (exact: the upper one) is s-a's; the traces' would be 100 ms.
    expect((await detailsOf(typical.id))[0]!.value).toBeCloseTo(20 * minute + 100, -1);
    expect((await detailsOf(tokens.id))[0]!.value).toBe(500);

    // A third session, succeeding: 3 sessions is not below 3, and 2 of 3 failing is under 0.9.
    await insertSpans(vigil.ctx, [sessionTrace(tenant, now + 10_000, "s-c")]);
    await evaluate(tenant, now + minute);
    expect((await incidentsOf(client, project, few.slug))[0]!.endedAt).not.toBeNull();
    expect((await incidentsOf(client, project, failing.slug))[0]!.endedAt).not.toBeNull();
    expect((await incidentsOf(client, project, long.slug))[0]!.endedAt).toBeNull();
    // Two hours on, s-a's last activity is out of the hour: nothing measured, the incident closes.
    await evaluate(tenant, now + 2 * hour);
    expect((await incidentsOf(client, project, long.slug))[0]!.endedAt).not.toBeNull();
    expect(await incidentsOf(client, project, long.slug)).toHaveLength(1);
  });

  test("match monitors open one incident per new matching session", async () => {
    const { client, project, tenant } = await account();
    const monitor = await client.monitors.create(project, {
      body: { trigger: "match", name: "failing sessions", target: { type: "user", id: "u-sessions", stream: "sessions", filterSet: { errorCount: [{ op: "gt", value: 0 }] } }, severity: "high" },
    });
    const t0 = Date.now();
    const failed = sessionTrace(tenant, t0 + 2, "s-b", { error: true });
    await insertSpans(vigil.ctx, [sessionTrace(tenant, t0, "s-a", { error: true }), sessionTrace(tenant, t0 + 1, "s-a", { error: true }), sessionTrace(tenant, t0 + 3, "s-a"), failed, sessionTrace(tenant, t0 + 4, "s-ok")]);
    await evaluate(tenant, t0 + minute);
    // Three failing traces, two failing sessions.
    const opened = await detailsOf(monitor.id);
    expect(opened.map((row) => row.item_key)).toEqual(["s-a", "s-b"]);
    expect(opened[1]!.trace_id).toBe(failed.trace_id);
    expect(await incidentsOf(client, project, monitor.slug)).toHaveLength(2);

    // Another failure in s-a is not a new session; a new failing session is.
    await insertSpans(vigil.ctx, [sessionTrace(tenant, t0 + 2 * minute, "s-a", { error: true }), sessionTrace(tenant, t0 + 2 * minute, "s-c", { error: true })]);
    await evaluate(tenant, t0 + 3 * minute);
    expect((await detailsOf(monitor.id)).map((row) => row.item_key)).toEqual(["s-a", "s-b", "s-c"]);
  });
});
