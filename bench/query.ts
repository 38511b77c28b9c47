// Read-path latency over a loaded project: list latest 50, a filtered list, a second page, full-text
// search, trace detail and 7- and 30-day analytics, through HTTP as clients see them.
// `bun run bench/query.ts [traces ...]`: one size per argument, in traces of 6 spans spread over 60 days
// (default 170000: 1.02M spans; 1700000 is 10.2M spans). Each size is loaded in turn into the same
// emptied tables and measured; with several sizes a last table compares them (growth = p50 ratio).
// Per read it also prints the rows and bytes ClickHouse read per call (system.query_log).
// Uses its own data directory (BENCH_DATA_DIR, default data/bench-query-<pid>, removed afterwards)
// with embedded PostgreSQL and chdb.
import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { loadConfig } from "../src/config";
import { createLogger } from "../src/lib/log";
import { flaggerSlugs } from "../src/modules/projects/model";
import { startVigil } from "../src/server";

const SIZES = (process.argv.length > 2 ? process.argv.slice(2) : ["170000"]).map((arg) => {
  const traces = Number(arg);
  if (!Number.isInteger(traces) || traces < 1000) throw new Error(`size ${arg}: give a number of traces (≥ 1000)`);
  return traces;
});
const SPANS_PER_TRACE = 6;
const INSERT_BATCH_TRACES = 25_000;
const ITERATIONS = Number(process.env.BENCH_ITERATIONS ?? 60);
const WARMUP = 5;
const DAY_MS = 24 * 3600_000;
/** Days the traces are spread over: analytics reads the last 7 of them. */
const SPREAD_DAYS = 60;

const ownDir = !process.env.BENCH_DATA_DIR;
const dataDir = process.env.BENCH_DATA_DIR ?? join(import.meta.dir, "..", "data", `bench-query-${process.pid}`);
mkdirSync(dataDir, { recursive: true });
const config = loadConfig({ DATA_DIR: dataDir, PORT: "0", OTLP_GRPC_PORT: "0", LOG_LEVEL: "warn", CLICKHOUSE_DATABASE: `bench_${Date.now()}` });
const vigil = await startVigil(config, createLogger("warn"));
const { ch } = vigil.ctx;

const bootstrap = await fetch(`${vigil.url}/v1/account/bootstrap`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
const account = (await bootstrap.json()) as { apiKey: string; projectSlug: string };
const [project] = await vigil.ctx.sql<{ id: string; organization_id: string }[]>`SELECT id, organization_id FROM projects WHERE slug = ${account.projectSlug} ORDER BY created_at DESC LIMIT 1`;
// Reads alone are measured: the flaggers would otherwise examine every loaded trace once it is quiet, in this process.
await fetch(`${vigil.url}/v1/projects/${account.projectSlug}`, {
  method: "PATCH",
  headers: { "content-type": "application/json", authorization: `Bearer ${account.apiKey}` },
  body: JSON.stringify({ flaggers: Object.fromEntries(flaggerSlugs.map((slug) => [slug, false])) }),
});

/**
 * Spans generated inside ClickHouse, in batches of whole traces: a root agent span, three chat spans
 * with messages, two tool spans. Traces start evenly over the last SPREAD_DAYS days.
 */
async function load(traces: number) {
  const now = Date.now();
  const question = "Where is my order? It was supposed to arrive last week and the tracking page shows nothing. ".repeat(6);
  const answer = "I checked the carrier and your parcel is in transit; it should arrive within two business days. ".repeat(4);
  for (let first = 0; first < traces; first += INSERT_BATCH_TRACES) {
    const count = Math.min(INSERT_BATCH_TRACES, traces - first);
    await ch.client.command({
      query: `
        INSERT INTO ${ch.database}.spans (organization_id, project_id, trace_id, span_id, parent_span_id, name, kind, status_code,
          service_name, start_time, end_time, duration_ns, operation, provider, model, session_id, user_id, tags, metadata,
          tokens_input, tokens_output, tokens_cache_read, cost_total_microcents, cost_is_estimated, time_to_first_token_ns,
          tool_name, input_messages, output_messages, message_text, defined_tools)
        SELECT {org:String}, {project:String}, trace_id, span_id,
          if(k = 0, '', substring(lower(hex(MD5(concat(toString(t), '-0')))), 1, 16)),
          ['agent', 'chat', 'search_docs', 'chat', 'lookup_order', 'chat'][k + 1],
          if(k = 0, 'server', 'client'),
          if(k = 4 AND t % 37 = 0, 'error', 'ok'),
          ['support-agent', 'billing-agent', 'sales-agent'][t % 3 + 1],
          start, start + toIntervalMillisecond(duration_ms), duration_ms * 1000000,
          ['invoke_agent', 'chat', 'execute_tool', 'chat', 'execute_tool', 'chat'][k + 1],
          if(is_chat, ['openai', 'anthropic'][t % 2 + 1], ''),
          if(is_chat, ['gpt-4o', 'claude-sonnet-4', 'gpt-4o-mini', 'claude-haiku'][t % 4 + 1], ''),
          concat('session-', toString(intDiv(t, 4))), concat('user-', toString(t % 5000)),
          [['prod'], ['prod', 'eu'], ['staging']][t % 3 + 1], map('env', ['prod', 'staging'][t % 2 + 1], 'tenant', concat('tenant-', toString(t % 50))),
          if(is_chat, 200 + t % 800, 0), if(is_chat, 50 + t % 300, 0), if(is_chat, t % 100, 0), if(is_chat, 1000 + (t % 997) * 100, 0), true,
          if(is_chat, 100000000 + (t % 1000) * 1000000, 0),
          if(k IN (2, 4), ['search_docs', 'lookup_order'][intDiv(k, 2)], ''),
          if(is_chat, concat('[{"role":"user","parts":[{"type":"text","content":"', {question:String}, toString(t), '"}]}]'), ''),
          if(is_chat, concat('[{"role":"assistant","parts":[{"type":"text","content":"', {answer:String}, '"}]}]'), ''),
          if(is_chat, concat({question:String}, toString(t), '\n', {answer:String}), ''),
          if(is_chat, ['search_docs', 'lookup_order'], [])
        FROM (
          SELECT number AS n, {first:UInt64} + intDiv(n, ${SPANS_PER_TRACE}) AS t, n % ${SPANS_PER_TRACE} AS k, k IN (1, 3, 5) AS is_chat,
            lower(hex(MD5(toString(t)))) AS trace_id, substring(lower(hex(MD5(concat(toString(t), '-', toString(k))))), 1, 16) AS span_id,
            fromUnixTimestamp64Milli(toInt64({now:Int64} - ${SPREAD_DAYS * DAY_MS} + t * intDiv(${SPREAD_DAYS * DAY_MS}, {traces:UInt64}) + k * 150), 'UTC') AS start,
            if(k = 0, 900 + t % 3000, 120 + (t * 7 + k) % 700) AS duration_ms
          FROM numbers(${count * SPANS_PER_TRACE})
        )`,
      query_params: { org: project.organization_id, project: project.id, first, now, traces, question, answer },
    });
    process.stdout.write(`\rloaded ${(first + count).toLocaleString("en")} / ${traces.toLocaleString("en")} traces`);
  }
  process.stdout.write("\n");
}

const headers = { authorization: `Bearer ${account.apiKey}`, "content-type": "application/json" };
const projectPath = `${vigil.url}/v1/projects/${account.projectSlug}`;

async function call(path: string, body?: unknown): Promise<unknown> {
  const response = await fetch(projectPath + path, body === undefined ? { headers } : { method: "POST", headers, body: JSON.stringify(body) });
  if (!response.ok) throw new Error(`${path}: ${response.status} ${await response.text()}`);
  return response.json();
}

interface Figure {
  p50: number;
  p99: number;
}

/** ClickHouse's counters of rows and bytes selected and of queries run, in this process. */
async function readCounters(): Promise<Record<string, number>> {
  const result = await ch.client.query({
    query: "SELECT event, value FROM system.events WHERE event IN ('SelectedRows', 'SelectedBytes', 'SelectQuery')",
    format: "JSONEachRow",
  });
  return Object.fromEntries((await result.json<{ event: string; value: number }>()).map((row) => [row.event, Number(row.value)]));
}

/** Rows and bytes ClickHouse read per call since `before` (the bench is the process's only reader). */
async function readVolume(before: Record<string, number>, calls: number): Promise<string> {
  const after = await readCounters();
  const per = (event: string) => ((after[event] ?? 0) - (before[event] ?? 0)) / calls;
  return `   read/call ${Math.round(per("SelectedRows")).toLocaleString("en").padStart(10)} rows ${(per("SelectedBytes") / 1048576).toFixed(1).padStart(6)} MiB, ${per("SelectQuery").toFixed(1)} queries`;
}

async function measure(name: string, target: number | null, run: (i: number) => Promise<unknown>): Promise<Figure> {
  for (let i = 0; i < WARMUP; i++) await run(i);
  const before = await readCounters();
  const times: number[] = [];
  for (let i = 0; i < ITERATIONS; i++) {
    const started = performance.now();
    await run(i);
    times.push(performance.now() - started);
  }
  times.sort((a, b) => a - b);
  const pick = (q: number) => times[Math.min(times.length - 1, Math.ceil(q * times.length) - 1)];
  const p50 = pick(0.5);
  const verdict = target === null ? "" : p50 <= target ? `  (target p50 ≤ ${target} ms: met)` : `  (target p50 ≤ ${target} ms: MISSED)`;
  console.log(`${name.padEnd(34)} p50 ${p50.toFixed(1).padStart(7)} ms   p99 ${pick(0.99).toFixed(1).padStart(7)} ms${verdict}${await readVolume(before, ITERATIONS)}`);
  return { p50, p99: pick(0.99) };
}

/** Each read with its p50 target at the largest size (ms). */
const reads: { name: string; target: number; run: (sample: string[], nextCursor: string) => (i: number) => Promise<unknown> }[] = [
  { name: "list latest 50", target: 100, run: () => () => call("/traces/list", { limit: 50 }) },
  { name: "list next page (cursor)", target: 100, run: (_, nextCursor) => () => call("/traces/list", { limit: 50, cursor: nextCursor }) },
  {
    name: "list filtered (model, duration, tag)",
    target: 150,
    run: () => () =>
      call("/traces/list", {
        limit: 50,
        filters: { models: [{ op: "eq", value: "gpt-4o" }], duration: [{ op: "gte", value: 1_500_000_000 }], tags: [{ op: "in", value: ["eu"] }] },
      }),
  },
  { name: "list by cost, desc", target: 200, run: () => () => call("/traces/list", { limit: 50, sortBy: "costTotalMicrocents" }) },
  { name: "list full-text search", target: 500, run: () => () => call("/traces/list", { limit: 50, query: "tracking parcel" }) },
  { name: "trace detail", target: 60, run: (sample) => (i) => call(`/traces/${sample[i % sample.length]}`) },
  { name: "trace spans", target: 60, run: (sample) => (i) => call(`/traces/${sample[i % sample.length]}/spans`) },
  { name: "analytics, 7 days", target: 150, run: () => () => call("/traces/analytics") },
  {
    name: "analytics, 30 days",
    target: 300,
    run: () => () => call(`/traces/analytics?fromIso=${new Date(Date.now() - 30 * DAY_MS).toISOString()}`),
  },
];

/**
 * Reads alone are measured, over settled tables: the quiet-trace scan starts after the loaded traces
 * (it would otherwise examine them all as they go quiet, in this process), and the load's merges finish.
 */
async function settle() {
  await vigil.ctx.sql`
    INSERT INTO quiet_trace_scan (scanned_until) VALUES (now() + interval '1 day')
    ON CONFLICT (id) DO UPDATE SET scanned_until = EXCLUDED.scanned_until, scanned_through_trace = '{}'`;
  const started = performance.now();
  for (;;) {
    const merging = await ch.client.query({ query: `SELECT count() AS merges FROM system.merges WHERE database = {database:String}`, query_params: { database: ch.database }, format: "JSONEachRow" });
    const [{ merges }] = await merging.json<{ merges: string }>();
    if (Number(merges) === 0) break;
    await Bun.sleep(1000);
  }
  console.log(`merges settled in ${((performance.now() - started) / 1000).toFixed(1)} s`);
}

/** Empties every table of the bench database, for the next size. */
async function truncateAll() {
  const result = await ch.client.query({
    query: `SELECT name FROM system.tables WHERE database = {database:String} AND engine LIKE '%MergeTree'`,
    query_params: { database: ch.database },
    format: "JSONEachRow",
  });
  for (const { name } of await result.json<{ name: string }>()) await ch.client.command({ query: `TRUNCATE TABLE ${ch.database}.${name}` });
}

const results: { spans: number; figures: Figure[] }[] = [];
try {
  for (const [index, traces] of SIZES.entries()) {
    if (index > 0) await truncateAll();
    const loadStarted = performance.now();
    await load(traces);
    const counted = await ch.client.query({ query: `SELECT count() AS spans, uniqExact(trace_id) AS traces FROM ${ch.database}.spans`, format: "JSONEachRow" });
    const [loaded] = await counted.json<{ spans: number; traces: number }>();
    console.log(`${Number(loaded.spans).toLocaleString("en")} spans, ${Number(loaded.traces).toLocaleString("en")} traces loaded in ${((performance.now() - loadStarted) / 1000).toFixed(1)} s`);
    await settle();

    const latest = (await call("/traces/list", { limit: 200 })) as { items: { traceId: string }[]; nextCursor: string };
    const sample = latest.items.map((item) => item.traceId);
    const figures: Figure[] = [];
    for (const read of reads) figures.push(await measure(read.name, read.target, read.run(sample, latest.nextCursor)));
    results.push({ spans: Number(loaded.spans), figures });
  }
  if (results.length > 1) {
    const millions = (spans: number) => `${(spans / 1e6).toFixed(2)}M`;
    console.log(`\n${"read".padEnd(38)}${results.map((r) => `${millions(r.spans)} p50 (p99)`.padStart(20)).join("")}   growth   target (largest)`);
    for (const [i, read] of reads.entries()) {
      const first = results[0].figures[i];
      const last = results[results.length - 1].figures[i];
      const cells = results.map((r) => `${r.figures[i].p50.toFixed(0)} (${r.figures[i].p99.toFixed(0)})`.padStart(20)).join("");
      console.log(`${read.name.padEnd(38)}${cells}   ${(last.p50 / first.p50).toFixed(1).padStart(5)}×   ≤ ${read.target} ms: ${last.p50 <= read.target ? "met" : "MISSED"}`);
    }
  }
} finally {
  await vigil.stop();
  if (ownDir) rmSync(dataDir, { recursive: true, force: true });
}
