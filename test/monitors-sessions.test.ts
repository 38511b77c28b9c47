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
 * Monitors over the sessions stream: items are sessions (the `sessions` roll-up joined to their
 * traces), so counts, rates and durations are per session, and a match opens one incident per
 * session however many of its traces match. Every monitor here would read other values, and open
 * or close at other times, over the traces of the same spans.
 */

const minute = 60_000;
const hour = 60 * minute;
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

/** One trace of one root span in a session of the user. */
const trace = (tenant: Tenant, at: number, session: string, fields: { error?: boolean; user?: string; cacheRead?: number; input?: number } = {}) =>
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

async function evaluate(tenant: Tenant, now: number) {
  await vigil.ctx.sql`UPDATE monitors SET next_evaluation_at = ${new Date(now)} WHERE project_id = ${tenant.projectId}`;
  return evaluator.evaluateProject(tenant.projectId, new Date(now));
}

async function incidentsOf(client: LatitudeClient, project: string, monitorSlug: string) {
  return (await client.monitors.listIncidents(project, monitorSlug, { limit: 100 })).items;
}

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
    const long = await client.monitors.create(project, {
      body: {
        trigger: "threshold",
        name: "long session",
        target: { type: "session", id: "s-a" },
        severity: "medium",
        condition: { trigger: "threshold", metric: { kind: "avg", field: "duration" }, threshold: { mode: "absolute", value: 10 * minute } },
      },
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
      trace(tenant, t0, "s-a", { input: 300, cacheRead: 100 }),
      trace(tenant, t0 + 10 * minute, "s-a", { error: true }),
      trace(tenant, t0 + 20 * minute, "s-a"),
      trace(tenant, t0 + 5 * minute, "s-b", { error: true, input: 100 }),
      trace(tenant, t0 + 6 * minute, "s-other", { user: "someone else" }),
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
    await insertSpans(vigil.ctx, [trace(tenant, now + 10_000, "s-c")]);
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
    const failed = trace(tenant, t0 + 2, "s-b", { error: true });
    await insertSpans(vigil.ctx, [trace(tenant, t0, "s-a", { error: true }), trace(tenant, t0 + 1, "s-a", { error: true }), trace(tenant, t0 + 3, "s-a"), failed, trace(tenant, t0 + 4, "s-ok")]);
    await evaluate(tenant, t0 + minute);
    // Three failing traces, two failing sessions.
    const opened = await detailsOf(monitor.id);
    expect(opened.map((row) => row.item_key)).toEqual(["s-a", "s-b"]);
    expect(opened[1]!.trace_id).toBe(failed.trace_id);
    expect(await incidentsOf(client, project, monitor.slug)).toHaveLength(2);

    // Another failure in s-a is not a new session; a new failing session is.
    await insertSpans(vigil.ctx, [trace(tenant, t0 + 2 * minute, "s-a", { error: true }), trace(tenant, t0 + 2 * minute, "s-c", { error: true })]);
    await evaluate(tenant, t0 + 3 * minute);
    expect((await detailsOf(monitor.id)).map((row) => row.item_key)).toEqual(["s-a", "s-b", "s-c"]);
  });
});
