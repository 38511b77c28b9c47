// Ingest benchmark: realistic GenAI OTLP/protobuf requests (bench/workload.ts) driven with autocannon
// against a Vigil started from this checkout with its defaults, compared with a same-run ceiling: the
// same requests through decode → map → price → batch → write in this process, without HTTP, auth or
// project lookups. Every phase stops its clock only once every acknowledged span is queryable.
// Usage: bun run bench [-- --seconds 20 --connections 8]
import autocannon from "autocannon";
import { mkdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { killGroup, spawnVigil, type VigilProcess } from "../test/process";
import { requestFactory, SPANS_PER_REQUEST } from "./workload";

const { values: args } = parseArgs({
  options: {
    seconds: { type: "string", default: "30" },
    connections: { type: "string", default: "8" },
    /** Only the in-process ceiling: to compare code changes without HTTP. */
    "ceiling-only": { type: "boolean", default: false },
  },
});
const seconds = Number(args.seconds);
const connections = Number(args.connections);
const benchDir = join(import.meta.dir, "..", ".vigil-bench");
const factory = requestFactory();

// ---------------------------------------------------------------- helpers
function peakRssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(status.match(/VmHWM:\s+(\d+)/)![1]) / 1024;
}

async function bootstrap(url: string) {
  const res = await fetch(`${url}/v1/account/bootstrap`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
  return (await res.json()) as { apiKey: string; projectSlug: string };
}

async function storedSpans(url: string, apiKey: string, projectSlug: string): Promise<number> {
  const from = new Date(Date.now() - 86_400_000).toISOString();
  const to = new Date(Date.now() + 3_600_000).toISOString();
  const res = await fetch(`${url}/v1/projects/${projectSlug}/traces/analytics?fromIso=${from}&toIso=${to}`, { headers: { authorization: `Bearer ${apiKey}` } });
  const body = (await res.json()) as { spans: { total: number } };
  return body.spans.total;
}

interface Phase {
  name: string;
  offeredRequestsPerSecond: number | null;
  spansPerSecond: number;
  mbPerSecond: number;
  p50: number;
  p99: number;
  refused: number;
  failed: number;
  peakRssMb: number;
}

async function drive(name: string, vigil: VigilProcess, options: { rate?: number; connections?: number; redaction?: "enforce" } = {}): Promise<Phase> {
  const account = await bootstrap(vigil.url);
  if (options.redaction) {
    const res = await fetch(`${vigil.url}/v1/projects/${account.projectSlug}`, {
      method: "PATCH",
      headers: { authorization: `Bearer ${account.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ settings: { redaction: { mode: options.redaction } } }),
    });
    if (!res.ok) throw new Error(`${name}: setting the redaction policy failed with ${res.status}`);
  }
  const started = performance.now();
  const result = await autocannon({
    url: `${vigil.url}/v1/traces`,
    method: "POST",
    connections: options.connections ?? connections,
    duration: seconds,
    overallRate: options.rate,
    timeout: 30,
    headers: { "content-type": "application/x-protobuf", authorization: `Bearer ${account.apiKey}`, "x-latitude-project": account.projectSlug },
    requests: [{ setupRequest: (request: object) => ({ ...request, body: factory.next() }) }],
  });
  const acknowledged = result["2xx"] * SPANS_PER_REQUEST;
  const deadline = Date.now() + 600_000;
  let stored = 0;
  while ((stored = await storedSpans(vigil.url, account.apiKey, account.projectSlug)) < acknowledged && Date.now() < deadline) await Bun.sleep(200);
  const elapsed = (performance.now() - started) / 1000;
  // Requests still in flight when autocannon stops are stored without their answer being counted: more may be stored, never fewer.
  if (stored < acknowledged) throw new Error(`${name}: only ${stored} of ${acknowledged} acknowledged spans became queryable`);
  const statuses = (result as unknown as { statusCodeStats: Record<string, { count: number }> }).statusCodeStats;
  const refused = (statuses["503"]?.count ?? 0) + (statuses["429"]?.count ?? 0);
  if (!(await fetch(`${vigil.url}/health`).then((res) => res.ok, () => false))) throw new Error(`${name}: Vigil is down after the phase`);
  return {
    name,
    offeredRequestsPerSecond: options.rate ?? null,
    spansPerSecond: acknowledged / elapsed,
    mbPerSecond: (result["2xx"] * factory.bytes) / elapsed / 1e6,
    p50: result.latency.p50,
    p99: result.latency.p99,
    refused,
    failed: result.non2xx - refused + result.errors,
    peakRssMb: peakRssMb(vigil.child.pid!),
  };
}

/** The same requests through decode → map → price → batch → write in this process, `connections` at a time. */
async function ceiling(): Promise<number> {
  const { loadConfig } = await import("../src/config");
  const { openClickHouse } = await import("../src/db/clickhouse");
  const { migrateClickHouse } = await import("../src/db/migrate");
  const { createLogger } = await import("../src/lib/log");
  const { decodeProtobuf } = await import("../src/ingest/decode");
  const { mapTraces } = await import("../src/ingest/map");
  const { priceSpan } = await import("../src/ingest/price");
  const { spanWriterOptions, startSpanWriter } = await import("../src/ingest/write");
  const log = createLogger("warn");
  const config = loadConfig({ ...process.env, DATA_DIR: join(benchDir, "ceiling"), CLICKHOUSE_DATABASE: "ceiling", CHDB_PATH: "" });
  const store = openClickHouse(config);
  await migrateClickHouse(store, null, log);
  const writer = await startSpanWriter(spanWriterOptions(config, store, log));
  const owner = { organizationId: "bench", projectId: "bench", apiKeyId: "bench" };
  const started = performance.now();
  let requests = 0;
  const client = async () => {
    while (performance.now() - started < seconds * 1000) {
      const body = factory.next();
      const rows = mapTraces(decodeProtobuf(body), owner);
      for (const row of rows) priceSpan(row);
      await writer.accept(rows, body.byteLength);
      requests++;
    }
  };
  await Promise.all(Array.from({ length: connections }, client));
  await writer.flush();
  const spansPerSecond = (requests * SPANS_PER_REQUEST) / ((performance.now() - started) / 1000);
  await writer.close();
  await store.close();
  return spansPerSecond;
}

// ---------------------------------------------------------------- run
rmSync(benchDir, { recursive: true, force: true });
mkdirSync(benchDir, { recursive: true });
const format = (phase: Phase) =>
  [
    phase.name.padEnd(30),
    `${phase.spansPerSecond.toFixed(0).padStart(6)} spans/s`,
    `${phase.mbPerSecond.toFixed(1).padStart(5)} MB/s`,
    `ack p50 ${String(phase.p50).padStart(4)} ms p99 ${String(phase.p99).padStart(5)} ms`,
    `503/429 ${String(phase.refused).padStart(5)}`,
    `failed ${phase.failed}`,
    `peak RSS ${phase.peakRssMb.toFixed(0)} MB`,
    phase.offeredRequestsPerSecond ? `(offered ${phase.offeredRequestsPerSecond * SPANS_PER_REQUEST} spans/s)` : "",
  ].join("  ");

async function withVigil(name: string, run: (vigil: VigilProcess) => Promise<Phase>) {
  const vigil = await spawnVigil(join(benchDir, name), { LOG_LEVEL: "warn" });
  try {
    const phase = await run(vigil);
    console.log(format(phase));
    return phase;
  } finally {
    killGroup(vigil.child, "SIGTERM");
    await vigil.exited;
  }
}

console.log(`ingest bench: ${SPANS_PER_REQUEST} spans/request of ${Math.round(factory.bytes / SPANS_PER_REQUEST)} B, ${connections} connections, ${seconds}s per phase`);
if (args["ceiling-only"]) {
  console.log(`${"ceiling (in-process, no HTTP)".padEnd(30)}  ${(await ceiling()).toFixed(0).padStart(6)} spans/s`);
  process.exit(0);
}
const plain = await withVigil("redaction-off", (vigil) => drive("max load, redaction off", vigil));
const enforced = await withVigil("redaction-enforced", (vigil) => drive("max load, redaction enforced", vigil, { redaction: "enforce" }));
const maxRequestsPerSecond = plain.spansPerSecond / SPANS_PER_REQUEST;
await withVigil("half-load", (vigil) => drive("half load", vigil, { rate: Math.max(1, Math.round(maxRequestsPerSecond / 2)) }));
await withVigil("overload", (vigil) => drive("2x overload", vigil, { rate: Math.round(maxRequestsPerSecond * 2), connections: connections * 8 }));
const ceilingSpansPerSecond = await ceiling();
console.log(`${"ceiling (in-process, no HTTP)".padEnd(30)}  ${ceilingSpansPerSecond.toFixed(0).padStart(6)} spans/s`);
console.log(
  `ratio to ceiling: redaction off ${(plain.spansPerSecond / ceilingSpansPerSecond).toFixed(2)}, enforced ${(enforced.spansPerSecond / ceilingSpansPerSecond).toFixed(2)}`,
);
rmSync(benchDir, { recursive: true, force: true });
process.exit(0);
