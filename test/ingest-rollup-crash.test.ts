// Crashes in the two windows of a segment insert, made deterministic by a test-only fault-injection point: between
// the commit of the `spans` part and its views' parts (`traces`, `sessions`), and between the commit of the whole
// insert and the removal of its write-ahead log segment. After the restart's replay, every acknowledged span is in
// `spans` once and counted once in every roll-up, and the API's list, detail, spans and analytics agree.
import { afterAll, expect, setDefaultTimeout, test } from "bun:test";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { LatitudeClient } from "@latitude-data/sdk";
import { buildTrace, expectAllReadable, expectStoredOnce, untilRolledUp, detailOf } from "./crash-workload";
import { bootstrapAccount, testRoot } from "./helpers";
import { killGroup, killWithPostgres, spawnVigil, type VigilProcess } from "./process";

setDefaultTimeout(60_000);

const dataDir = join(testRoot, "ingest-rollup-crash");
const started: VigilProcess[] = [];

afterAll(() => {
  for (const vigil of started) killWithPostgres(vigil);
  rmSync(dataDir, { recursive: true, force: true });
});

const windows = [
  ["spans-part", "after the spans part of an insert commits and before its views' parts do loses nothing from the roll-ups"],
  ["log-removal", "after an insert commits and before its write-ahead log segment is removed counts nothing twice"],
] as const;

test.each(windows)("a crash %s: %s", async (window) => {
  rmSync(dataDir, { recursive: true, force: true });
  // The second segment insert crashes in the window; the first goes in whole.
  const first = await spawnVigil(dataDir, { VIGIL_TEST_CRASH_AT: `${window}:2` });
  started.push(first);
  const { account, client: firstClient } = await bootstrapAccount(first.url, { projectName: "Rollup crash" });
  const slug = account.projectSlug;
  const send = (body: string) =>
    fetch(`${first.url}/v1/traces`, { method: "POST", body, headers: { "content-type": "application/json", authorization: `Bearer ${account.apiKey}`, "x-latitude-project": slug } });

  const before = buildTrace("before", 10);
  expect((await send(before.body)).status).toBe(200);
  expect(await untilRolledUp(firstClient, slug, [before], 15_000)).toEqual([]);

  // The same session continues in the crashing segment: its roll-up row must add up across both.
  const crashed = [buildTrace("crashed-1", 50, before.sessionId), buildTrace("crashed-2", 50)];
  const statuses = await Promise.all(crashed.map(async (trace) => (await send(trace.body)).status));
  expect(statuses).toEqual([200, 200]);
  expect(await first.exited).toBeNull();
  expect(first.output()).not.toContain('"stopped"');

  const second = await spawnVigil(dataDir);
  started.push(second);
  const client = new LatitudeClient({ baseUrl: second.url, apiKey: account.apiKey, maxRetries: 0 } as never);
  const acknowledged = [before, ...crashed];
  expect((await untilRolledUp(client, slug, acknowledged, 20_000)).map((trace) => trace.traceId)).toEqual([]);
  await expectAllReadable(client, slug, acknowledged);
  expect((await detailOf(client, slug, crashed[0]!.traceId))?.sessionId).toBe(before.sessionId);

  killGroup(second.child, "SIGTERM");
  expect(await second.exited).toBe(0);
  const counts = await expectStoredOnce(dataDir, acknowledged);
  expect(counts.sessions.get(before.sessionId)).toBe(60);
}, 180_000);
