import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { newId } from "../src/lib/ids";
import { createLogger } from "../src/lib/log";
import { MonitorEvaluator } from "../src/modules/monitors/evaluate";
import { Measurer } from "../src/modules/monitors/measure";
import { ensureSystemMonitors } from "../src/modules/monitors/service";
import { createSignalSource, type SignalInfo, type SignalSource } from "../src/modules/monitors/signal-source";
import { TraceSearch } from "../src/modules/traces/search";
import type { Vigil } from "../src/server";
import { newTraceId, tenantOf, type Tenant } from "./fixtures/spans";
import { bootstrapAccount, startTestVigil } from "./helpers";

setDefaultTimeout(120_000);

/**
 * Escalation of signals through the system monitor: failed scores in the ClickHouse copy counted per
 * hour (the real counts), the signals listed by a source standing in for the signals table.
 */

const hour = 3600_000;
let vigil: Vigil;

beforeAll(async () => {
  vigil = await startTestVigil({ MONITOR_INTERVAL_SECONDS: "0" });
});
afterAll(() => vigil.stop());

/** `perHour(h)` failed scores of the signal in each of the `hours` hours before `currentHour`. */
async function insertFailedScores(tenant: Tenant, signalId: string, currentHour: number, hours: number, perHour: (h: number) => number) {
  const rows = [];
  for (let h = 1; h <= hours; h++) {
    for (let i = 0; i < perHour(h); i++) {
      const at = new Date(currentHour - h * hour + 60_000 + i * 1000).toISOString().replace("T", " ").replace("Z", "");
      rows.push({
        organization_id: tenant.organizationId, project_id: tenant.projectId, trace_id: newTraceId(), id: newId(), span_id: "", session_id: "", simulation_id: "",
        signal_id: signalId, source: "evaluation", source_id: "judge", annotator_id: "", value: 0, passed: false, errored: false, duration: 0, tokens: 0, cost: 0,
        drafted_at: null, created_at: at, updated_at: at, version: 1, deleted: 0,
      });
    }
  }
  await vigil.ctx.ch.client.insert({ table: `${vigil.ctx.ch.database}.scores`, values: rows, format: "JSONEachRow" });
}

test("signals escalate on their seasonal baseline with the project's sensitivity; young signals never; muted ones silently", async () => {
  const { account, client } = await bootstrapAccount(vigil.url);
  const tenant = await tenantOf(vigil.ctx, account.apiKey, account.projectSlug);
  const project = account.projectSlug;
  await ensureSystemMonitors(vigil.ctx.sql, tenant.projectId);
  const now = Math.floor(Date.now() / hour) * hour + 10 * 60_000;
  const currentHour = Math.floor(now / hour) * hour;
  const old = new Date(now - 20 * 24 * hour);
  const signals: SignalInfo[] = [
    { id: newId(), name: "refunds fail", firstSeenAt: old, mutedAt: null, regressedAt: null, resolvedAt: null },
    { id: newId(), name: "young", firstSeenAt: new Date(now - 3 * 24 * hour), mutedAt: null, regressedAt: null, resolvedAt: null },
    { id: newId(), name: "muted", firstSeenAt: old, mutedAt: old, regressedAt: null, resolvedAt: null },
  ];
  // 2 an hour for 16 days, 10 an hour in the last 6 complete hours.
  for (const signal of signals) await insertFailedScores(tenant, signal.id, currentHour, 16 * 24, (h) => (h <= 6 ? 10 : 2));

  const recorded: { signalId: string; escalating: boolean }[] = [];
  const real = createSignalSource(vigil.ctx);
  const source: SignalSource = {
    activeSignals: async () => signals,
    hourlyCounts: real.hourlyCounts,
    recordEscalation: async (_project, signalId, escalating) => void recorded.push({ signalId, escalating }),
  };
  const log = createLogger("silent");
  const evaluator = new MonitorEvaluator(vigil.ctx.sql, new Measurer(vigil.ctx.ch, new TraceSearch(null, log)), source, 60, log);
  const evaluate = async (at: number) => {
    await vigil.ctx.sql`UPDATE monitors SET next_evaluation_at = ${new Date(at)} WHERE project_id = ${tenant.projectId}`;
    await evaluator.evaluateProject(tenant.projectId, new Date(at));
  };
  const signalIncidents = async () => (await client.incidents.list(project, { source_type: "signal", fromIso: new Date(now - 30 * 24 * hour).toISOString(), toIso: new Date(now + 30 * 24 * hour).toISOString() })).items;

  // Sensitivity 6: 10 is not above 2 + 6·√2 = 10.5.
  await client.projects.update(project, { settings: { escalation: { sensitivity: 6 } } } as never);
  await evaluate(now);
  expect(await signalIncidents()).toEqual([]);

  await client.projects.update(project, { settings: { escalation: { sensitivity: 3 } } } as never);
  await evaluate(now + 60_000);
  const opened = await signalIncidents();
  expect(opened.map((incident) => incident.sourceId).sort()).toEqual([signals[0].id, signals[2].id].sort());
  expect(opened.every((incident) => incident.endedAt === null && incident.condition === null)).toBe(true);
  expect(recorded).toEqual(expect.arrayContaining([{ signalId: signals[0].id, escalating: true }, { signalId: signals[2].id, escalating: true }]));
  const notices = await vigil.ctx.sql<{ source_id: string; open_notice: string }[]>`SELECT source_id, open_notice FROM incidents WHERE project_id = ${tenant.projectId}`;
  expect(Object.fromEntries(notices.map((row) => [row.source_id, row.open_notice]))).toEqual({ [signals[0].id]: "pending", [signals[2].id]: "silent" });
  const system = (await client.monitors.list(project)).items.find((monitor) => monitor.slug === "escalating-signals")!;
  expect((await client.monitors.listIncidents(project, system.slug)).items).toHaveLength(2);

  // Once the 6-hour window is back to normal (8 hours on) and stays so for 30 minutes, they close.
  await evaluate(now + 8 * hour);
  await evaluate(now + 8 * hour + 30 * 60_000);
  expect((await signalIncidents()).every((incident) => incident.endedAt !== null)).toBe(true);
  expect(recorded.filter((entry) => !entry.escalating).map((entry) => entry.signalId).sort()).toEqual([signals[0].id, signals[2].id].sort());
});
