// One monitor evaluation tick over 1,000 monitors on 1M spans: wall time and CPU of the tick, cold
// (every seasonal baseline computed) and steady (a minute later, baselines cached for the hour).
// `bun run bench/monitors.ts [spans] [monitors] [projects]` (default 1,000,000 spans in traces of 5 over
// 30 days, 1,000 monitors, in 10 projects). Uses its own data directory (BENCH_DATA_DIR, default
// data/bench-monitors-<pid>, removed afterwards) with embedded PostgreSQL and chdb. The CPU figure is
// this process's (Vigil with chdb in-process); the embedded PostgreSQL server's CPU is not in it.
import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { loadConfig } from "../src/config";
import { createLogger } from "../src/lib/log";
import { MonitorEvaluator } from "../src/modules/monitors/evaluate";
import { Measurer } from "../src/modules/monitors/measure";
import type { CreateMonitorBody } from "../src/modules/monitors/model";
import { MonitorsService } from "../src/modules/monitors/service";
import { createSignalSource } from "../src/modules/monitors/signal-source";
import { SavedSearches } from "../src/modules/searches/service";
import { TraceSearch } from "../src/modules/traces/search";
import { startVigil } from "../src/server";

const SPANS = Number(process.argv[2] ?? 1_000_000);
const MONITORS = Number(process.argv[3] ?? 1000);
const PROJECTS = Number(process.argv[4] ?? 10);
const SPANS_PER_TRACE = 5;
const DAY_MS = 24 * 3600_000;
const SPREAD_DAYS = 30;

const ownDir = !process.env.BENCH_DATA_DIR;
const dataDir = process.env.BENCH_DATA_DIR ?? join(import.meta.dir, "..", "data", `bench-monitors-${process.pid}`);
mkdirSync(dataDir, { recursive: true });
const config = loadConfig({ DATA_DIR: dataDir, PORT: "0", OTLP_GRPC_PORT: "0", LOG_LEVEL: "warn", CLICKHOUSE_DATABASE: `bench_${Date.now()}`, MONITOR_INTERVAL_SECONDS: "0" });
const log = createLogger("warn");
const vigil = await startVigil(config, log);
const { ch, sql } = vigil.ctx;

const bootstrap = await fetch(`${vigil.url}/v1/account/bootstrap`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
const account = (await bootstrap.json()) as { apiKey: string; projectSlug: string };
const [first] = await sql<{ id: string; organization_id: string }[]>`SELECT id, organization_id FROM projects WHERE slug = ${account.projectSlug} ORDER BY created_at DESC LIMIT 1`;
const projects = [{ id: first!.id, organizationId: first!.organization_id }];
for (let i = 1; i < PROJECTS; i++) {
  const response = await fetch(`${vigil.url}/v1/projects`, {
    method: "POST",
    headers: { authorization: `Bearer ${account.apiKey}`, "content-type": "application/json" },
    body: JSON.stringify({ name: `bench ${i}` }),
  });
  const project = (await response.json()) as { id: string; organizationId: string };
  projects.push({ id: project.id, organizationId: project.organizationId });
}

/** Traces of a root span, two chat spans and two tool spans, evenly over the last SPREAD_DAYS days, round-robin over the projects. */
async function load() {
  const traces = Math.floor(SPANS / SPANS_PER_TRACE);
  const batch = 40_000;
  const now = Date.now();
  for (let start = 0; start < traces; start += batch) {
    const count = Math.min(batch, traces - start);
    await ch.client.command({
      query: `
        INSERT INTO ${ch.database}.spans (organization_id, project_id, trace_id, span_id, parent_span_id, name, kind, status_code, service_name,
          start_time, end_time, duration_ns, operation, provider, model, session_id, user_id, tags, tokens_input, tokens_output, tokens_cache_read,
          cost_total_microcents, tool_name)
        SELECT {org:String}, {projects:Array(String)}[t % length({projects:Array(String)}) + 1], trace_id, span_id,
          if(k = 0, '', substring(lower(hex(MD5(concat(toString(t), '-0')))), 1, 16)),
          ['agent', 'chat', 'search', 'chat', 'lookup'][k + 1], if(k = 0, 'server', 'client'),
          if(k IN (2, 4) AND t % 23 = 0, 'error', 'ok'), 'agent',
          start, start + toIntervalMillisecond(duration_ms), duration_ms * 1000000,
          ['invoke_agent', 'chat', 'execute_tool', 'chat', 'execute_tool'][k + 1],
          if(k IN (1, 3), 'openai', ''), if(k IN (1, 3), ['gpt-4o', 'gpt-4o-mini'][t % 2 + 1], ''),
          concat('session-', toString(intDiv(t, 4))), concat('user-', toString(t % 200)), ['prod'],
          if(k IN (1, 3), 300 + t % 500, 0), if(k IN (1, 3), 80 + t % 200, 0), if(k IN (1, 3), t % 150, 0), if(k IN (1, 3), 2000 + t % 900, 0),
          if(k IN (2, 4), ['search', 'lookup'][intDiv(k, 2)], '')
        FROM (
          SELECT number AS n, {first:UInt64} + intDiv(n, ${SPANS_PER_TRACE}) AS t, n % ${SPANS_PER_TRACE} AS k,
            lower(hex(MD5(toString(t)))) AS trace_id, substring(lower(hex(MD5(concat(toString(t), '-', toString(k))))), 1, 16) AS span_id,
            fromUnixTimestamp64Milli(toInt64({now:Int64} - ${SPREAD_DAYS * DAY_MS} + t * intDiv(${SPREAD_DAYS * DAY_MS}, {traces:UInt64}) + k * 100), 'UTC') AS start,
            if(k = 0, 800 + t % 2500, 100 + (t * 7 + k) % 600) AS duration_ms
          FROM numbers(${count * SPANS_PER_TRACE})
        )`,
      query_params: { org: projects[0].organizationId, projects: projects.map((project) => project.id), first: start, now, traces },
    });
    process.stdout.write(`\rloaded ${((start + count) * SPANS_PER_TRACE).toLocaleString("en")} / ${SPANS.toLocaleString("en")} spans`);
  }
  process.stdout.write("\n");
}

/** A mix of monitors: matches, thresholds of each mode, escalating ones (detector and held thresholds), tool monitors on spans. */
function monitorBody(i: number, searchId: string): CreateMonitorBody {
  const user = { type: "user" as const, id: `user-${i % 200}` };
  const name = `monitor ${i}`;
  const severity = "medium" as const;
  const metric = [{ kind: "count" as const }, { kind: "errorRate" as const }, { kind: "avg" as const, field: "duration" as const }, { kind: "sum" as const, field: "cost" as const }][i % 4];
  switch (i % 8) {
    case 0:
      return { trigger: "match", name, target: { type: "savedSearch", id: searchId }, severity };
    case 1:
      return { trigger: "match", name, target: { ...user, filterSet: { errorCount: [{ op: "gt", value: 0 }] } }, severity };
    case 2:
      return { trigger: "threshold", name, target: user, severity, condition: { trigger: "threshold", metric, threshold: { mode: "absolute", value: 1e9 } } };
    case 3:
      return { trigger: "threshold", name, target: user, severity, condition: { trigger: "threshold", metric, threshold: { mode: "multiplier", factor: 3, baseline: { kind: "period", lookback: { unit: "hours", hours: 1 } } } } };
    case 4:
      return { trigger: "threshold", name, target: user, severity, condition: { trigger: "threshold", metric, threshold: { mode: "expected", sensitivity: 3 } } };
    case 5:
      return { trigger: "escalating", name, target: user, severity, condition: { trigger: "escalating", metric: { kind: "count" }, sensitivity: 3, window: { minutes: 10 } } };
    case 6:
      return { trigger: "escalating", name, target: { type: "tool", id: ["search", "lookup"][i % 2] }, severity, condition: { trigger: "escalating", metric: { kind: "errorRate" }, threshold: { mode: "absolute", value: 0.5 }, window: { minutes: 5 } } };
    default:
      return { trigger: "threshold", name, target: { type: "tool", id: "search" }, severity, condition: { trigger: "threshold", metric: { kind: "max", field: "duration" }, threshold: { mode: "absolute", value: 1e9 } } };
  }
}

async function tick(evaluator: MonitorEvaluator, now: Date) {
  await sql`UPDATE monitors SET next_evaluation_at = ${now}`;
  const cpu = process.cpuUsage();
  const started = performance.now();
  const counts = await evaluator.tick(now);
  const wall = (performance.now() - started) / 1000;
  const used = process.cpuUsage(cpu);
  const cpuSeconds = (used.user + used.system) / 1e6;
  return { counts, wall, cpuSeconds };
}

try {
  const loadStarted = performance.now();
  await load();
  const counted = await ch.client.query({ query: `SELECT count() AS spans, uniqExact(trace_id) AS traces FROM ${ch.database}.spans`, format: "JSONEachRow" });
  const [{ spans, traces }] = await counted.json<{ spans: number; traces: number }>();
  console.log(`${Number(spans).toLocaleString("en")} spans, ${Number(traces).toLocaleString("en")} traces in ${PROJECTS} projects, loaded in ${((performance.now() - loadStarted) / 1000).toFixed(1)} s`);

  const searches = new SavedSearches(sql);
  const monitors = new MonitorsService(sql, (project, slugOrId) => searches.get(project, slugOrId));
  const searchIds = new Map<string, string>();
  for (const project of projects) searchIds.set(project.id, (await searches.create(project, { name: "errors", filters: { status: [{ op: "eq", value: "error" }] } })).id);
  for (let i = 0; i < MONITORS; i++) {
    const project = projects[i % projects.length];
    await monitors.create(project, monitorBody(i, searchIds.get(project.id)!));
  }
  console.log(`${MONITORS} monitors (+ ${PROJECTS * 3} system monitors) created`);

  const evaluator = new MonitorEvaluator(sql, new Measurer(ch, new TraceSearch(null, log)), createSignalSource(vigil.ctx), 60, log);
  const now = Date.now();
  const cold = await tick(evaluator, new Date(now));
  const steady = await tick(evaluator, new Date(now + 60_000));
  const again = await tick(evaluator, new Date(now + 120_000));
  for (const [name, run] of [["cold tick (baselines computed)", cold], ["steady tick (+1 min)", steady], ["steady tick (+2 min)", again]] as const) {
    console.log(
      `${name.padEnd(32)} ${String(run.counts.monitors).padStart(5)} monitors  wall ${run.wall.toFixed(2).padStart(6)} s  cpu ${run.cpuSeconds.toFixed(2).padStart(6)} s` +
        `  = ${((run.cpuSeconds / 60) * 100).toFixed(1)}% of one core over the minute  (incidents opened ${run.counts.opened}, closed ${run.counts.closed})`,
    );
  }
  const worst = Math.max(steady.wall, again.wall);
  console.log(`goal: steady tick under 10 s wall (${worst < 10 ? "met" : "MISSED"}) and under 20% of one core (${Math.max(steady.cpuSeconds, again.cpuSeconds) / 60 < 0.2 ? "met" : "MISSED"}); cold/steady wall ratio ${(cold.wall / steady.wall).toFixed(1)}×`);
} finally {
  await vigil.stop();
  if (ownDir) rmSync(dataDir, { recursive: true, force: true });
}
