import { beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import type { LatitudeClient } from "@latitude-data/sdk";
import { openIncident } from "../src/modules/monitors/incidents";
import type { Vigil } from "../src/server";
import { tenantOf, type Tenant } from "./fixtures/spans";
import { bootstrapAccount, sharedVigil } from "./helpers";
import { sdkFailure } from "./sdk";

setDefaultTimeout(60_000);

type ListMonitorsForTargetBody = Parameters<LatitudeClient["monitors"]["listForTarget"]>[1];

let vigil: Vigil;
let client: LatitudeClient;
let project: string;
let tenant: Tenant;

beforeAll(async () => {
  vigil = await sharedVigil();
  const { account, client: sdk } = await bootstrapAccount(vigil.url);
  client = sdk;
  project = account.projectSlug;
  tenant = await tenantOf(vigil.ctx, account.apiKey, project);
});

describe("monitors through the official 9.15.0 client", () => {
  test("create each trigger, list with system monitors first, get, update, delete", async () => {
    const search = await client.savedSearches.create(project, { name: "errors", filters: { status: [{ op: "eq", value: "error" }] } });
    const match = await client.monitors.create(project, { body: { trigger: "match", name: "Any error", target: { type: "savedSearch", id: search.slug }, severity: "high" } });
    expect(match).toMatchObject({ slug: "any-error", system: false, description: "", mutedAt: null, deletedAt: null, projectId: tenant.projectId });
    expect(match.target).toMatchObject({ type: "savedSearch", id: search.id, savedSearchId: search.id, kind: "savedSearch", stream: "traces", filterSet: search.filters });
    expect(match.rule).toMatchObject({ trigger: "match", severity: "high", config: { metric: { kind: "count" }, filterSet: search.filters } });

    const threshold = await client.monitors.create(project, {
      body: {
        trigger: "threshold",
        name: "Slow user",
        target: { type: "user", id: "user-7" },
        severity: "medium",
        condition: { trigger: "threshold", metric: { kind: "avg", field: "duration" }, threshold: { mode: "absolute", value: 2000 }, direction: "above" },
      },
    });
    expect(threshold.target).toMatchObject({ type: "user", id: "user-7", stream: "traces", filterSet: { userId: [{ op: "eq", value: "user-7" }] } });
    expect(threshold.rule.config.condition).toMatchObject({ trigger: "threshold", threshold: { mode: "absolute", value: 2000 } });

    const escalating = await client.monitors.create(project, {
      body: {
        trigger: "escalating",
        name: "Search tool errors",
        description: "calls of the search tool",
        target: { type: "tool", id: "search" },
        severity: "urgent",
        condition: { trigger: "escalating", metric: { kind: "errorRate" }, sensitivity: 2, window: { minutes: 10 } },
      },
    });
    expect(escalating.target).toMatchObject({
      type: "tool",
      stream: "spans",
      filterSet: { operation: [{ op: "eq", value: "execute_tool" }], toolName: [{ op: "eq", value: "search" }] },
    });

    const list = await client.monitors.list(project);
    const systems = list.items.filter((monitor) => monitor.system);
    expect(systems.map((monitor) => monitor.slug).sort()).toEqual(["escalating-signals", "new-signals", "regressed-signals"]);
    expect(list.items.slice(0, 3).every((monitor) => monitor.system)).toBe(true);
    expect(list.items.slice(3).map((monitor) => monitor.id)).toEqual([escalating.id, threshold.id, match.id]);

    const page = await client.monitors.list(project, { limit: 2 });
    const next = await client.monitors.list(project, { limit: 10, cursor: page.nextCursor! });
    expect([...page.items, ...next.items].map((monitor) => monitor.id)).toEqual(list.items.map((monitor) => monitor.id));
    expect((await client.monitors.list(project, { search: "SLOW" })).items.map((monitor) => monitor.id)).toEqual([threshold.id]);

    expect(await client.monitors.get(project, threshold.slug)).toEqual(threshold);
    const renamed = await client.monitors.update(project, threshold.slug, { name: "Slow VIP user", severity: "high" });
    expect(renamed).toMatchObject({ slug: "slow-vip-user", rule: { severity: "high" } });
    expect((await sdkFailure(client.monitors.get(project, threshold.slug))).statusCode).toBe(404);

    const system = systems[0];
    expect((await sdkFailure(client.monitors.update(project, system.slug, { name: "mine" }))).statusCode).toBe(403);
    expect((await sdkFailure(client.monitors.delete(project, system.slug))).statusCode).toBe(403);
    const mutedSystem = await client.monitors.mute(project, system.slug);
    expect(mutedSystem.mutedAt).not.toBeNull();
    expect((await client.monitors.unmute(project, system.slug)).mutedAt).toBeNull();

    const forUser = await client.monitors.listForTarget(project, { targetType: "user", filterSetContains: { userId: [{ op: "eq", value: "user-7" }] } });
    expect(forUser.items.map((monitor) => monitor.id)).toEqual([threshold.id]);
    const forTool = await client.monitors.listForTarget(project, { filterSetContains: { operation: [{ op: "eq", value: "execute_tool" }], toolName: [{ op: "eq", value: "search" }] } });
    expect(forTool.items.map((monitor) => monitor.id)).toEqual([escalating.id]);
    expect((await client.monitors.listForTarget(project, { targetType: "session", filterSetContains: {} })).items).toEqual([]);

    await client.monitors.delete(project, match.slug);
    expect((await sdkFailure(client.monitors.get(project, match.slug))).statusCode).toBe(404);
  });

  test("for-target finds or creates the monitor of a target, once even under concurrent calls", async () => {
    const request: ListMonitorsForTargetBody = { targetType: "user", filterSetContains: { userId: [{ op: "eq", value: "user-for-target" }] } };
    const [first, second] = await Promise.all([client.monitors.listForTarget(project, request), client.monitors.listForTarget(project, request)]);
    expect(first.items).toHaveLength(1);
    const created = first.items[0]!;
    expect(second.items.map((monitor) => monitor.id)).toEqual([created.id]);
    expect(created).toMatchObject({ system: false, target: { type: "user", id: "user-for-target", stream: "traces", filterSet: request.filterSetContains } });
    expect(created.rule).toMatchObject({ trigger: "escalating", severity: "medium", config: { metric: { kind: "count" }, condition: { trigger: "escalating" } } });
    expect((await client.monitors.listForTarget(project, request)).items.map((monitor) => monitor.id)).toEqual([created.id]);
    expect(await client.monitors.get(project, created.slug)).toEqual(created);
    const live = (await client.monitors.list(project, { limit: 100 })).items.filter((monitor) => monitor.target.id === "user-for-target");
    expect(live.map((monitor) => monitor.id)).toEqual([created.id]);

    const tool: ListMonitorsForTargetBody = { filterSetContains: { operation: [{ op: "eq", value: "execute_tool" }], toolName: [{ op: "eq", value: "fetch_page" }] } };
    const forTool = await client.monitors.listForTarget(project, tool);
    expect(forTool.items).toHaveLength(1);
    expect(forTool.items[0]!.target).toMatchObject({ type: "tool", id: "fetch_page", stream: "spans", filterSet: tool.filterSetContains });
    expect((await client.monitors.listForTarget(project, { targetType: "tool", filterSetContains: { toolName: [{ op: "eq", value: "fetch_page" }] } })).items.map((monitor) => monitor.id)).toEqual([forTool.items[0]!.id]);

    // A session is a single item of the sessions stream: its monitor counts the session's traces.
    const session: ListMonitorsForTargetBody = { targetType: "session", filterSetContains: { sessionId: [{ op: "eq", value: "session-for-target" }] } };
    const forSession = await client.monitors.listForTarget(project, session);
    expect(forSession.items).toHaveLength(1);
    expect(forSession.items[0]!.target).toMatchObject({ type: "session", id: "session-for-target", stream: "traces" });

    // Deleted, the next call creates a fresh one; a filter set naming no single entity creates nothing.
    await client.monitors.delete(project, created.slug);
    const recreated = await client.monitors.listForTarget(project, request);
    expect(recreated.items).toHaveLength(1);
    expect(recreated.items[0]!.id).not.toBe(created.id);
    expect((await client.monitors.listForTarget(project, { targetType: "user", filterSetContains: { userId: [{ op: "in", value: ["a", "b"] }] } })).items).toEqual([]);
  });

  test("bad monitors are 400s", async () => {
    const noUser = await sdkFailure(client.monitors.create(project, { body: { trigger: "match", name: "x", target: { type: "user", id: null }, severity: "low" } }));
    expect(noUser.statusCode).toBe(400);
    expect(noUser.body.error).toContain("target.id");
    const shortWindow = await sdkFailure(
      client.monitors.create(project, {
        body: { trigger: "escalating", name: "x", target: { type: "session", id: "s" }, severity: "low", condition: { trigger: "escalating", metric: { kind: "count" }, window: { minutes: 2 } } },
      }),
    );
    expect(shortWindow.statusCode).toBe(400);
    const badFilter = await sdkFailure(
      client.monitors.create(project, { body: { trigger: "match", name: "x", target: { type: "savedSearch", id: null, filterSet: { bogus: [{ op: "eq", value: 1 }] } }, severity: "low" } }),
    );
    expect(badFilter.statusCode).toBe(400);
    expect(badFilter.body.error).toContain("bogus");
  });

  test("incidents: list by window, source and severity; resolve; a monitor's incidents with `notified`", async () => {
    const monitor = await client.monitors.create(project, { body: { trigger: "match", name: "Listed", target: { type: "session", id: "s-1" }, severity: "low" } });
    const base = { organizationId: tenant.organizationId, projectId: tenant.projectId, condition: null, details: {}, notify: false };
    const hourAgo = new Date(Date.now() - 3600_000);
    const sustained = await openIncident(vigil.ctx.sql, { ...base, sourceType: "monitor", sourceId: monitor.id, kind: "monitor.threshold", severity: "high", startedAt: hourAgo });
    const point = await openIncident(vigil.ctx.sql, { ...base, sourceType: "monitor", sourceId: monitor.id, kind: "monitor.match", severity: "low", startedAt: new Date(), itemKey: "t1" });
    expect(await openIncident(vigil.ctx.sql, { ...base, sourceType: "monitor", sourceId: monitor.id, kind: "monitor.threshold", severity: "high", startedAt: new Date() })).toBeNull();
    const old = await openIncident(vigil.ctx.sql, { ...base, sourceType: "signal", sourceId: "sig", kind: "signal.new", severity: "medium", startedAt: new Date(Date.now() - 10 * 86400_000), itemKey: "sig" });

    const all = await client.incidents.list(project);
    expect(all.items.map((incident) => incident.id)).toEqual([sustained!.id, point!.id]);
    expect(all.items[0]).toMatchObject({ sourceType: "monitor", sourceId: monitor.id, severity: "high", endedAt: null, condition: null });
    const wide = await client.incidents.list(project, { fromIso: new Date(Date.now() - 30 * 86400_000).toISOString() });
    expect(wide.items.map((incident) => incident.id)).toEqual([old!.id, sustained!.id, point!.id]);
    expect((await client.incidents.list(project, { severities: ["high", "medium"], fromIso: new Date(0).toISOString() })).items.map((i) => i.id)).toEqual([old!.id, sustained!.id]);
    expect((await client.incidents.list(project, { source_type: "signal", fromIso: new Date(0).toISOString() })).items.map((i) => i.id)).toEqual([old!.id]);
    expect((await client.incidents.list(project, { source_id: monitor.id, severities: "low" })).items.map((i) => i.id)).toEqual([point!.id]);
    expect((await sdkFailure(client.incidents.list(project, { fromIso: "yesterday" }))).statusCode).toBe(400);

    const resolved = await client.incidents.resolve(project, sustained!.id);
    expect(resolved.endedAt).not.toBeNull();
    expect(await client.incidents.resolve(project, sustained!.id)).toEqual(resolved);
    expect((await sdkFailure(client.incidents.resolve(project, "nope"))).statusCode).toBe(404);
    // Resolved, the source may open a new one.
    expect(await openIncident(vigil.ctx.sql, { ...base, sourceType: "monitor", sourceId: monitor.id, kind: "monitor.threshold", severity: "high", startedAt: new Date() })).not.toBeNull();

    const ofMonitor = await client.monitors.listIncidents(project, monitor.slug, { limit: 2 });
    expect(ofMonitor.items).toHaveLength(2);
    expect(ofMonitor.items[0].notified).toBe(false);
    const rest = await client.monitors.listIncidents(project, monitor.slug, { cursor: ofMonitor.nextCursor! });
    expect(ofMonitor.items.length + rest.items.length).toBe(3);
  });
});
