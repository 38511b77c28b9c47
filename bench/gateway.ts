/**
 * Overhead the prompt gateway adds over the provider: a local OpenAI-compatible provider with zero
 * latency, called directly and through Vigil (`/api/v3/.../documents/run`), streamed and not, at 1 and
 * 50 concurrent runs. Prints time to the first text token and to the last byte, p50/p99, and Vigil's
 * overhead as the difference of the two in the same run.
 *
 *   bun run bench/gateway.ts [--runs 300] [--concurrent-runs 2000]
 */
import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import postgres from "postgres";
import { startEmbeddedPostgres } from "../src/db/postgres";
import { createLogger } from "../src/lib/log";
import { startFakeProvider } from "../test/gateway-provider";
import { killGroup, spawnVigil } from "../test/process";

const { values: args } = parseArgs({ options: { runs: { type: "string", default: "300" }, "concurrent-runs": { type: "string", default: "2000" } } });
const benchDir = join(import.meta.dir, "..", ".vigil-bench", "gateway");
rmSync(benchDir, { recursive: true, force: true });
mkdirSync(benchDir, { recursive: true });

const PROMPT = `---
provider: openai
model: gpt-4o-mini
---
<system>You greet people.</system>
<user>{{ name }}</user>`;

interface Sample {
  firstMs: number;
  lastMs: number;
}

/** Reads a response to its end; `first` is when a chunk holding `marker` arrived. */
async function timed(start: number, response: Response, marker: string | null): Promise<Sample> {
  if (!response.ok) throw new Error(`HTTP ${response.status}: ${await response.text()}`);
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let firstMs = -1;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (firstMs < 0 && (marker === null || decoder.decode(value, { stream: true }).includes(marker))) firstMs = performance.now() - start;
  }
  const lastMs = performance.now() - start;
  return { firstMs: firstMs < 0 ? lastMs : firstMs, lastMs };
}

const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
};

async function drive(concurrency: number, total: number, once: () => Promise<Sample>): Promise<Sample[]> {
  const samples: Sample[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next++ < total) samples.push(await once());
    }),
  );
  return samples;
}

const provider = startFakeProvider();
const pg = await startEmbeddedPostgres(join(benchDir, "pg-root"), createLogger("silent"));
const databaseUrl = pg.url.replace(/\/postgres$/, "/gateway_bench");
const admin = postgres(pg.url, { max: 1, onnotice: () => {} });
await admin.unsafe("CREATE DATABASE gateway_bench");
await admin.end();
const vigil = await spawnVigil(join(benchDir, "vigil"), { DATABASE_URL: databaseUrl, OPENAI_API_KEY: "bench", OPENAI_BASE_URL: provider.url, LOG_LEVEL: "warn" });
const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
try {
  const account = (await (await fetch(`${vigil.url}/v1/account/bootstrap`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })).json()) as { apiKey: string; projectSlug: string };
  const [project] = await sql<{ gateway_id: string; organization_id: string }[]>`SELECT gateway_id, organization_id FROM projects WHERE slug = ${account.projectSlug}`;
  // The benchmark measures latency, not the plan's limit.
  await sql`UPDATE organizations SET plan = 'enterprise' WHERE id = ${project!.organization_id}`;
  const headers = { Authorization: `Bearer ${account.apiKey}`, "content-type": "application/json" };
  const base = `${vigil.url}/api/v3/projects/${project!.gateway_id}/versions/live/documents`;
  const saved = await fetch(`${base}/create-or-update`, { method: "POST", headers, body: JSON.stringify({ path: "greet", prompt: PROMPT, force: true }) });
  if (!saved.ok) throw new Error(`saving the prompt failed: ${await saved.text()}`);

  const direct = (stream: boolean) => async () => {
    const start = performance.now();
    const body = { model: "gpt-4o-mini", stream, stream_options: stream ? { include_usage: true } : undefined, messages: [{ role: "system", content: "You greet people." }, { role: "user", content: "Ada" }] };
    return timed(start, await fetch(`${provider.url}/chat/completions`, { method: "POST", headers: { "content-type": "application/json", Authorization: "Bearer bench" }, body: JSON.stringify(body) }), stream ? '"content":"Hello"' : null);
  };
  const viaVigil = (stream: boolean) => async () => {
    const start = performance.now();
    return timed(start, await fetch(`${base}/run`, { method: "POST", headers, body: JSON.stringify({ path: "greet", parameters: { name: "Ada" }, stream }) }), stream ? "text-delta" : null);
  };

  // Warm both paths (JIT, connection pools, caches).
  await drive(4, 100, direct(true));
  await drive(4, 100, viaVigil(true));
  await drive(4, 100, viaVigil(false));

  const rows: string[] = [];
  for (const stream of [true, false]) {
    for (const concurrency of [1, 50]) {
      const total = concurrency === 1 ? Number(args.runs) : Number(args["concurrent-runs"]);
      const baseline = await drive(concurrency, total, direct(stream));
      const measured = await drive(concurrency, total, viaVigil(stream));
      const stat = (samples: Sample[], key: keyof Sample, p: number) => percentile(samples.map((s) => s[key]), p);
      const overhead = (key: keyof Sample, p: number) => (stat(measured, key, p) - stat(baseline, key, p)).toFixed(1);
      rows.push(
        `| ${stream ? "streamed" : "not streamed"} | ${concurrency} | ${total} | ${stat(baseline, "firstMs", 50).toFixed(1)} / ${stat(measured, "firstMs", 50).toFixed(1)} | ` +
          `${overhead("firstMs", 50)} / ${overhead("firstMs", 99)} | ${stat(baseline, "lastMs", 50).toFixed(1)} / ${stat(measured, "lastMs", 50).toFixed(1)} | ${overhead("lastMs", 50)} / ${overhead("lastMs", 99)} |`,
      );
      console.error(rows.at(-1));
    }
  }
  console.log("| mode | concurrent runs | runs | first token p50 direct / via Vigil (ms) | first token overhead p50 / p99 | last byte p50 direct / via Vigil | last byte overhead p50 / p99 |");
  console.log("|---|---|---|---|---|---|---|");
  for (const row of rows) console.log(row);
} finally {
  await sql.end();
  killGroup(vigil.child, "SIGTERM");
  await vigil.exited;
  provider.stop();
  await pg.stop();
}
