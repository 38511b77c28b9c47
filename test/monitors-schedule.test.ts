import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import type { Vigil } from "../src/server";
import { insertSpans, newTraceId, spanRow, tenantOf } from "./fixtures/spans";
import { bootstrapAccount, startTestVigil } from "./helpers";

setDefaultTimeout(240_000);

/** The scheduled path end to end: pg-boss's minute tick queues the project, a worker evaluates it. */

let vigil: Vigil;
beforeAll(async () => {
  vigil = await startTestVigil({ MONITOR_INTERVAL_SECONDS: "20" });
});
afterAll(() => vigil.stop());

test("a due monitor is evaluated by the scheduled job and its incident opens without anyone asking", async () => {
  const { account, client } = await bootstrapAccount(vigil.url);
  const tenant = await tenantOf(vigil.ctx, account.apiKey, account.projectSlug);
  const monitor = await client.monitors.create(account.projectSlug, {
    body: { trigger: "match", name: "scheduled", target: { type: "user", id: "u-sched", filterSet: { status: [{ op: "eq", value: "error" }] } }, severity: "low" },
  });
  await insertSpans(vigil.ctx, [spanRow(tenant, { trace_id: newTraceId(), startMs: Date.now(), status_code: "error", user_id: "u-sched" })]);
  const deadline = Date.now() + 200_000;
  let incidents = 0;
  while (Date.now() < deadline) {
    incidents = (await client.monitors.listIncidents(account.projectSlug, monitor.slug)).items.length;
    if (incidents) break;
    await Bun.sleep(1000);
  }
  expect(incidents).toBe(1);
  const [row] = await vigil.ctx.sql<{ next: Date }[]>`SELECT next_evaluation_at AS next FROM monitors WHERE id = ${monitor.id}`;
  expect(row!.next.getTime()).toBeGreaterThan(Date.now() - 25_000);
});
