// Soak: kill/restart cycles on one data directory under 8 concurrent exporters. Odd cycles SIGKILL Vigil's process
// group after a random number of acknowledgements; even ones crash it exactly between the commit of a segment's
// `spans` part and its views' parts (the test-only fault-injection point). Like real exporters, the workers send
// again in the next cycle what was not acknowledged. At the end every trace is acknowledged, and the list, detail,
// spans, analytics and the stored rows all agree: each span once, counted once in every roll-up.
// SOAK_CYCLES (default 4) sets the number of crashes.
import { afterAll, expect, setDefaultTimeout, test } from "bun:test";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { LatitudeClient } from "@latitude-data/sdk";
import { buildTrace, expectAllReadable, expectStoredOnce, listedTraces, spansOf, untilRolledUp, type SentTrace } from "./crash-workload";
import { bootstrapAccount, testRoot } from "./helpers";
import { killGroup, killWithPostgres, spawnVigil, type VigilProcess } from "./process";

setDefaultTimeout(60_000);

const CYCLES = Number(process.env.SOAK_CYCLES || 4);
const WORKERS = 8;
const TRACES_PER_CYCLE = 40;
const dataDir = join(testRoot, "ingest-soak");
const started: VigilProcess[] = [];

afterAll(() => {
  for (const vigil of started) killWithPostgres(vigil);
  rmSync(dataDir, { recursive: true, force: true });
});

const began = performance.now();
const log = (line: string) => console.log(`ingest-soak ${((performance.now() - began) / 1000).toFixed(1)}s: ${line}`);
const randomBetween = (low: number, high: number) => low + Math.floor(Math.random() * (high - low + 1));

test(`${CYCLES} kill/restart cycles under concurrent exporters lose and double nothing`, async () => {
  rmSync(dataDir, { recursive: true, force: true });
  let vigil = await spawnVigil(dataDir);
  started.push(vigil);
  const { account } = await bootstrapAccount(vigil.url, { projectName: "Soak" });
  const slug = account.projectSlug;
  const acknowledged: SentTrace[] = [];
  let unacknowledged: SentTrace[] = [];
  let sent = 0;
  let crashesDuringReplay = 0;

  for (let cycle = 1; cycle <= CYCLES + 1; cycle++) {
    const last = cycle > CYCLES;
    const injected = !last && cycle % 2 === 0;
    if (cycle > 1) {
      // The injected crash may come while the log left by the previous crash is replayed, before Vigil is healthy.
      const next = await spawnVigil(dataDir, injected ? { VIGIL_TEST_CRASH_AT: `${cycle % 4 === 0 ? "log-removal" : "spans-part"}:${randomBetween(1, 3)}` } : {}).catch((error: Error) => {
        if (injected && error.message.includes('"replaying the span write-ahead log"')) return null;
        throw error;
      });
      if (!next) {
        crashesDuringReplay++;
        continue;
      }
      vigil = next;
      started.push(vigil);
    }
    // Resent first, as exporters retry; the last cycle only resends, and must get everything acknowledged.
    const queue = [...unacknowledged, ...(last ? [] : Array.from({ length: TRACES_PER_CYCLE }, () => buildTrace(`soak-${++sent}`, 50, `soak-session-${sent % 7}`)))];
    unacknowledged = [];
    const killAfter = last || injected ? Infinity : randomBetween(10, 40);
    let acksThisCycle = 0;
    let dead = false;
    const url = vigil.url;
    const worker = async () => {
      for (let trace = queue.shift(); trace; trace = queue.shift()) {
        if (dead) {
          unacknowledged.push(trace);
          continue;
        }
        const ok = await fetch(`${url}/v1/traces`, {
          method: "POST",
          body: trace.body,
          headers: { "content-type": "application/json", authorization: `Bearer ${account.apiKey}`, "x-latitude-project": slug },
        }).then(
          async (response) => (await response.arrayBuffer(), response.status === 200),
          () => false,
        );
        (ok ? acknowledged : unacknowledged).push(trace);
        if (ok && ++acksThisCycle >= killAfter && !dead) {
          dead = true;
          killGroup(vigil.child, "SIGKILL");
        }
      }
    };
    await Promise.all(Array.from({ length: WORKERS }, worker));
    if (last) break;
    // The injected crash may not come (fewer segments than its number): then a SIGKILL after the inserts.
    if (injected && !dead) await Promise.race([vigil.exited, Bun.sleep(3_000)]);
    killGroup(vigil.child, "SIGKILL");
    expect(await vigil.exited).toBeNull();
    log(`cycle ${cycle} ${injected ? "injected" : "killed"}: ${acknowledged.length} acknowledged`);
  }
  expect(unacknowledged).toEqual([]);
  expect(acknowledged.length).toBe(sent);

  log("all acknowledged");
  const client = new LatitudeClient({ baseUrl: vigil.url, apiKey: account.apiKey, maxRetries: 0 } as never);
  // The last start replays what the previous crash left; on a loaded machine that takes a while.
  const late = await untilRolledUp(client, slug, acknowledged, 120_000);
  const listed = await listedTraces(client, slug);
  expect(await Promise.all(late.map(async (trace) => ({ traceId: trace.traceId, listed: listed.get(trace.traceId), spans: (await spansOf(client, slug, trace.traceId)).length })))).toEqual([]);
  log("all rolled up");
  await expectAllReadable(client, slug, acknowledged, 24);
  log("all readable");
  killGroup(vigil.child, "SIGTERM");
  expect(await vigil.exited).toBe(0);
  const counts = await expectStoredOnce(dataDir, acknowledged);
  // No duplicate rows left unmerged either would be counted by a reader that does not deduplicate.
  expect([...counts.spanRows.values()].reduce((sum, rows) => sum + rows, 0)).toBeGreaterThanOrEqual(acknowledged.length * 50);
  console.log(`ingest-soak: ${CYCLES} crashes (${crashesDuringReplay} during a replay), ${acknowledged.length} traces (${acknowledged.length * 50} spans) acknowledged, every one stored and rolled up once`);
}, Math.max(600_000, CYCLES * 90_000));
