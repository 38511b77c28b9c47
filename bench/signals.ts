// Signals: discovery throughput and flagger cost per trace.
// `bun run bench/signals.ts [scores] [signals]` (default 100,000 failed scores over 500 kinds of failure;
// 0 scores skips discovery). BENCH_FLAGGER_REQUESTS sets the flagger phase's requests (default 150, 20 traces each).
// 1. Discovery: failed scores with paraphrased feedback are written with their events in bulk, then one
//    worker drains them with the local embedding; prints scores linked per second and signals formed.
// 2. Flaggers: the ingest benchmark's traces (5 spans each) are ingested over HTTP from a sender process
//    (the process CPU of the whole ingest path), then the quiet-trace detectors run every flagger on them;
//    prints CPU µs per trace of both, split into loading facts and the passes, and the flaggers' CPU as a
//    share of the full ingest's (goal ≤ 0.10), with decode + map + price alone for reference.
// Uses its own data directory (BENCH_DATA_DIR, default data/bench-signals-<pid>, removed afterwards).
import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { loadConfig } from "../src/config";
import { decodeProtobuf } from "../src/ingest/decode";
import { mapTraces } from "../src/ingest/map";
import { priceSpan } from "../src/ingest/price";
import { newId } from "../src/lib/ids";
import { createLogger } from "../src/lib/log";
import { defaultTraceBatch as traceBatch, TraceDetectors } from "../src/modules/signals/detectors";
import { runFlaggers } from "../src/modules/signals/flaggers";
import { loadTracesFacts } from "../src/modules/signals/trace-facts";
import { flaggerSlugs } from "../src/modules/projects/model";
import { signalsRuntime } from "../src/modules/signals/runtime";
import { startVigil } from "../src/server";
import { requestFactory, SPANS_PER_REQUEST, SPANS_PER_TRACE } from "./workload";

const SCORES = Number(process.argv[2] ?? 100_000);
const KINDS = Number(process.argv[3] ?? 500);
const FLAGGER_REQUESTS = Number(process.env.BENCH_FLAGGER_REQUESTS ?? 150);
/** Concurrent senders of the full-ingest phase, as the ingest benchmark. */
const CONNECTIONS = 8;
/** Rounds of the flagger measurement; the median is reported. */
const ROUNDS = 3;

const ownDir = !process.env.BENCH_DATA_DIR;
const dataDir = process.env.BENCH_DATA_DIR ?? join(import.meta.dir, "..", "data", `bench-signals-${process.pid}`);
mkdirSync(dataDir, { recursive: true });
const config = loadConfig({ DATA_DIR: dataDir, PORT: "0", OTLP_GRPC_PORT: "0", LOG_LEVEL: "warn", TRACE_QUIET_SECONDS: "86400", CLICKHOUSE_DATABASE: `bench_${Date.now()}` });
const vigil = await startVigil(config, createLogger("warn"));
const { sql } = vigil.ctx;
const bootstrap = await fetch(`${vigil.url}/v1/account/bootstrap`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
const account = (await bootstrap.json()) as { apiKey: string; projectSlug: string };
const [project] = await sql<{ id: string; organization_id: string }[]>`SELECT id, organization_id FROM projects WHERE slug = ${account.projectSlug}`;

/** Deterministic pseudo-random numbers, so every run writes the same feedback. */
let seed = 42;
const random = () => ((seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0) / 2 ** 32);
const pick = <T>(items: T[]) => items[Math.floor(random() * items.length)]!;
const syllables = "ba be bi bo bu da de di do du fa fe fi fo ka ke ki ko la le li lo ma me mi mo na ne ni no pa pe pi po ra re ri ro sa se si so ta te ti to va ve vi vo za ze zi zo".split(" ");
const word = () => Array.from({ length: 2 + Math.floor(random() * 3) }, () => pick(syllables)).join("");
const fillers = ["the agent", "again", "when the user asked", "it said", "so the answer was wrong", "in this trace", "clearly", "looks like"];

// Each kind of failure is four words of its own; a review uses three of them in its own order with fillers.
const kinds = Array.from({ length: KINDS }, () => Array.from({ length: 4 }, word));
const feedbackOf = (kind: string[]) => {
  const chosen = [...kind].sort(() => random() - 0.5).slice(0, 3);
  return [pick(fillers), chosen[0], chosen[1], pick(fillers), chosen[2]].join(" ");
};

if (SCORES > 0) {
console.log(`discovery: writing ${SCORES.toLocaleString("en")} failed scores over ${KINDS} kinds of failure…`);
const chunk = 5_000;
for (let written = 0; written < SCORES; written += chunk) {
  const count = Math.min(chunk, SCORES - written);
  const ids = Array.from({ length: count }, () => newId());
  const feedback = ids.map(() => feedbackOf(pick(kinds)));
  await sql.begin(async (tx) => {
    await tx`
      INSERT INTO scores (id, organization_id, project_id, source, source_id, trace_id, value, passed, feedback)
      SELECT id, ${project!.organization_id}, ${project!.id}, 'custom', 'bench', md5(id), 0, false, feedback
      FROM unnest(${tx.array(ids)}::text[], ${tx.array(feedback)}::text[]) AS input(id, feedback)`;
    await tx`
      INSERT INTO failed_score_events (score_id, organization_id, project_id)
      SELECT unnest(${tx.array(ids)}::text[]), ${project!.organization_id}, ${project!.id}`;
  });
}
const discovery = signalsRuntime(vigil.ctx).discovery;
const cpuBefore = process.cpuUsage();
const started = performance.now();
await discovery.drain();
// The scheduled discovery job may hold the last batches: the run ends when no event is pending.
while ((await sql`SELECT 1 FROM failed_score_events WHERE consumed_at IS NULL LIMIT 1`).length) await Bun.sleep(50);
const seconds = (performance.now() - started) / 1000;
const cpu = process.cpuUsage(cpuBefore);
// The scheduled discovery job may have taken some batches in parallel: count what is linked.
const [{ linked }] = [...(await sql<{ linked: number }[]>`SELECT count(*)::int AS linked FROM signal_members`)];
const [formed] = await sql<{ signals: number; visible: number; largest: number }[]>`
  SELECT count(*)::int AS signals, count(visible_at)::int AS visible, max(member_count)::int AS largest FROM signals WHERE project_id = ${project!.id}`;
console.log(
  `discovery: ${linked.toLocaleString("en")} scores linked in ${seconds.toFixed(1)} s = ${Math.round(linked / seconds).toLocaleString("en")} scores/s ` +
    `(process CPU ${((cpu.user + cpu.system) / 1e6).toFixed(1)} s); ${formed!.signals} signals formed for ${KINDS} kinds (${formed!.visible} visible, largest ${formed!.largest})`,
);

}

// Flaggers. The same traces are decoded, mapped and priced in this process (that part of the ingest CPU
// alone), then ingested for real: POSTed to this process's `/v1/traces` at full concurrency, the phase
// ending once every span is queryable. chdb runs in this process, so the process CPU of that phase is
// the whole ingest path (HTTP, auth, decode, map, redact, price, write-ahead log, ClickHouse insert and
// its materialized views); the bodies are sent by a process of its own. Then the quiet-trace detectors
// run on those traces.
const factory = requestFactory(50);
const warmupBodies = Array.from({ length: 20 }, () => factory.next());
const bodies = Array.from({ length: FLAGGER_REQUESTS }, () => factory.next());
const owner = { organizationId: project!.organization_id, projectId: project!.id, apiKeyId: "bench" };
const ingestBefore = process.cpuUsage();
const rows = bodies.flatMap((body) => mapTraces(decodeProtobuf(body), owner).map(priceSpan));
const ingestCpu = process.cpuUsage(ingestBefore);
const decodeMicrosPerTrace = ((ingestCpu.user + ingestCpu.system) / rows.length) * SPANS_PER_TRACE;
const traceIds = [...new Set(rows.map((row) => row.trace_id))];

/**
 * POSTs the bodies to `url` from a process of its own (bench/post-bodies.ts), CONNECTIONS at a time;
 * CPU µs this process spends until `settled` resolves.
 */
async function postAll(url: string, requests: Buffer[], headers: Record<string, string>, settled: () => Promise<void>): Promise<number> {
  const file = join(dataDir, "bodies.bin");
  const lengthOf = (body: Buffer) => {
    const length = Buffer.alloc(4);
    length.writeUInt32BE(body.length);
    return length;
  };
  await Bun.write(file, Buffer.concat(requests.flatMap((body) => [lengthOf(body), body])));
  const before = process.cpuUsage();
  const sender = Bun.spawn(["bun", "run", join(import.meta.dir, "post-bodies.ts"), file, url, String(CONNECTIONS)], {
    env: { ...process.env, POST_HEADERS: JSON.stringify(headers) },
    stderr: "inherit",
  });
  if ((await sender.exited) !== 0) throw new Error("sending the bodies failed");
  await settled();
  const cpu = process.cpuUsage(before);
  return cpu.user + cpu.system;
}
const storedSpans = async () => {
  const result = await vigil.ctx.ch.client.query({
    query: `SELECT count() AS spans FROM ${vigil.ctx.ch.database}.spans WHERE organization_id = {organizationId:String} AND project_id = {projectId:String}`,
    query_params: owner,
    format: "JSONEachRow",
  });
  return Number((await result.json<{ spans: string }>())[0]!.spans);
};
const allStored = (spans: number) => async () => {
  while ((await storedSpans()) < spans) await Bun.sleep(100);
};
const otlpHeaders = { authorization: `Bearer ${account.apiKey}`, "x-latitude-project": account.projectSlug };
await postAll(`${vigil.url}/v1/traces`, warmupBodies, otlpHeaders, allStored(warmupBodies.length * SPANS_PER_REQUEST));
const fullIngestCpu = await postAll(`${vigil.url}/v1/traces`, bodies, otlpHeaders, allStored((warmupBodies.length + bodies.length) * SPANS_PER_REQUEST));
const fullIngestPerTrace = fullIngestCpu / traceIds.length;

/** Process CPU µs per ms of wall time over a second of doing nothing: chdb's merges, pg-boss polling. */
const idleRate = async () => {
  const before = process.cpuUsage();
  const started = performance.now();
  await Bun.sleep(1000);
  const cpu = process.cpuUsage(before);
  return (cpu.user + cpu.system) / (performance.now() - started);
};
// The insert's merges run on after the last span is queryable: the flaggers are measured once they are
// done (within a minute), as they run on traces quiet for TRACE_QUIET_SECONDS.
let idle = await idleRate();
for (let waited = 0; idle > 100 && waited < 60; waited++) idle = await idleRate();

const detectors = new TraceDetectors(vigil.ctx);
const warmupTraceIds = [...new Set(warmupBodies.flatMap((body) => mapTraces(decodeProtobuf(body), owner).map((row) => row.trace_id)))];
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
/** CPU µs per trace of `run` over the measured traces in the scan's batches, the median of ROUNDS runs. */
async function perTrace(run: (batch: string[]) => unknown): Promise<number> {
  const rounds: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const before = process.cpuUsage();
    for (let at = 0; at < traceIds.length; at += traceBatch) await run(traceIds.slice(at, at + traceBatch));
    const cpu = process.cpuUsage(before);
    rounds.push((cpu.user + cpu.system) / traceIds.length);
  }
  return median(rounds);
}
// Warm-up on the warm-up requests' traces, then the measured traces in the scan's batches (one project's
// quiet traces of a tick at once). No trace matches, so every round does the same work.
await detectors.runTraces(owner.organizationId, owner.projectId, warmupTraceIds);
const flaggerStarted = performance.now();
const flaggerMicros = await perTrace((batch) => detectors.runTraces(owner.organizationId, owner.projectId, batch));
const flaggerWallMs = (performance.now() - flaggerStarted) / ROUNDS / traceIds.length;
// The same traces again, split: loading their facts from ClickHouse, and the flaggers' passes alone.
const facts = new Map<string, Awaited<ReturnType<typeof loadTracesFacts>>>();
const loadMicros = await perTrace(async (batch) => facts.set(batch[0]!, await loadTracesFacts(vigil.ctx.ch, owner.organizationId, owner.projectId, batch)));
const passMicros = await perTrace((batch) => {
  for (const trace of facts.get(batch[0]!)!) runFlaggers(trace, [...flaggerSlugs]);
});
const [flags] = await sql<{ flags: number }[]>`SELECT count(*)::int AS flags FROM scores WHERE project_id = ${project!.id} AND source_id = 'SYSTEM'`;
const ratio = flaggerMicros / fullIngestPerTrace;
console.log(
  `flaggers: ${traceIds.length.toLocaleString("en")} traces of ${SPANS_PER_TRACE} spans, every flagger enabled, no judge provider, median of ${ROUNDS} rounds: ` +
    `${Math.round(flaggerMicros)} µs CPU per trace (${flaggerWallMs.toFixed(2)} ms wall), ${flags!.flags} flags written\n` +
    `  loading facts from ClickHouse ${Math.round(loadMicros)} µs, deterministic passes ${Math.round(passMicros)} µs, the rest (settling verdicts) ${Math.round(Math.max(0, flaggerMicros - loadMicros - passMicros))} µs\n` +
    `full ingest over HTTP, ${CONNECTIONS} connections: ${Math.round(fullIngestPerTrace)} µs process CPU per trace (decode + map + price alone ${Math.round(decodeMicrosPerTrace)} µs)\n` +
    `flaggers / full ingest = ${ratio.toFixed(3)} (goal ≤ 0.10: ${ratio <= 0.1 ? "met" : "not met"}); flaggers / decode + map + price = ${(flaggerMicros / decodeMicrosPerTrace).toFixed(3)}\n` +
    `  (the idle process spends ${Math.round(idle)} µs CPU per ms of wall time, counted in both)`,
);

await vigil.stop();
if (ownDir) rmSync(dataDir, { recursive: true, force: true });
