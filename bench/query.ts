// Read-path latency over a loaded project: list latest 50, a filtered list, a second page, full-text
// search, trace detail and 7-day analytics, through HTTP as clients see them.
// `bun run bench/query.ts [traces]` (default 170,000 traces of 6 spans: 1.02M spans, over 60 days). Uses its own
// data directory (BENCH_DATA_DIR, default data/bench-query-<pid>, removed afterwards) with embedded
// PostgreSQL and chdb.
import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { loadConfig } from "../src/config";
import { createLogger } from "../src/lib/log";
import { startVigil } from "../src/server";

const TRACES = Number(process.argv[2] ?? 170_000);
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

/**
 * Spans generated inside ClickHouse, in batches of whole traces: a root agent span, three chat spans
 * with messages, two tool spans. Traces start evenly over the last SPREAD_DAYS days.
 */
async function load() {
  const now = Date.now();
  const question = "Where is my order? It was supposed to arrive last week and the tracking page shows nothing. ".repeat(6);
  const answer = "I checked the carrier and your parcel is in transit; it should arrive within two business days. ".repeat(4);
  for (let first = 0; first < TRACES; first += INSERT_BATCH_TRACES) {
    const count = Math.min(INSERT_BATCH_TRACES, TRACES - first);
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
      query_params: { org: project.organization_id, project: project.id, first, now, traces: TRACES, question, answer },
    });
    process.stdout.write(`\rloaded ${(first + count).toLocaleString("en")} / ${TRACES.toLocaleString("en")} traces`);
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

async function measure(name: string, target: number | null, run: (i: number) => Promise<unknown>) {
  for (let i = 0; i < WARMUP; i++) await run(i);
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
  console.log(`${name.padEnd(34)} p50 ${p50.toFixed(1).padStart(7)} ms   p99 ${pick(0.99).toFixed(1).padStart(7)} ms${verdict}`);
}

try {
  const loadStarted = performance.now();
  await load();
  const counted = await ch.client.query({ query: `SELECT count() AS spans, uniqExact(trace_id) AS traces FROM ${ch.database}.spans`, format: "JSONEachRow" });
  const [{ spans, traces }] = await counted.json<{ spans: number; traces: number }>();
  console.log(`${Number(spans).toLocaleString("en")} spans, ${Number(traces).toLocaleString("en")} traces loaded in ${((performance.now() - loadStarted) / 1000).toFixed(1)} s`);

  const latest = (await call("/traces/list", { limit: 200 })) as { items: { traceId: string }[]; nextCursor: string };
  const sample = latest.items.map((item) => item.traceId);
  await measure("list latest 50", 100, () => call("/traces/list", { limit: 50 }));
  await measure("list next page (cursor)", null, () => call("/traces/list", { limit: 50, cursor: latest.nextCursor }));
  await measure("list filtered (model, duration, tag)", null, () =>
    call("/traces/list", {
      limit: 50,
      filters: { models: [{ op: "eq", value: "gpt-4o" }], duration: [{ op: "gte", value: 1_500_000_000 }], tags: [{ op: "in", value: ["eu"] }] },
    }),
  );
  await measure("list by cost, desc", null, () => call("/traces/list", { limit: 50, sortBy: "costTotalMicrocents" }));
  await measure("list full-text search", null, () => call("/traces/list", { limit: 50, query: "tracking parcel" }));
  await measure("trace detail", 100, (i) => call(`/traces/${sample[i % sample.length]}`));
  await measure("trace spans", null, (i) => call(`/traces/${sample[i % sample.length]}/spans`));
  await measure("analytics, 7 days", 300, () => call("/traces/analytics"));
} finally {
  await vigil.stop();
  if (ownDir) rmSync(dataDir, { recursive: true, force: true });
}
