// `rebuild-rollups`: recomputes the trace and session roll-ups of a project or a time range from `spans`, each
// span once, idempotently, leaving everything out of its scope alone.
import { afterAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { rebuildRollups } from "../src/db/rollups";
import { buildTrace, expectStoredOnce, type SentTrace } from "./crash-workload";
import { bootstrapAccount, startTestVigil, testRoot } from "./helpers";
import { killGroup, killWithPostgres, spawnVigil, type VigilProcess } from "./process";

setDefaultTimeout(60_000);

const started: VigilProcess[] = [];
afterAll(() => {
  for (const vigil of started) killWithPostgres(vigil);
});

const send = (url: string, apiKey: string, slug: string, trace: SentTrace) =>
  fetch(`${url}/v1/traces`, { method: "POST", body: trace.body, headers: { "content-type": "application/json", authorization: `Bearer ${apiKey}`, "x-latitude-project": slug } });

describe("rebuilding the roll-ups", () => {
  test("repairs lost and doubled roll-up rows of the project in scope, idempotently, and nothing else", async () => {
    const vigil = await startTestVigil();
    const { ch, spanWriter } = vigil.ctx;
    const db = ch.database;
    const first = await bootstrapAccount(vigil.url, { projectName: "Repaired" });
    const second = await bootstrapAccount(vigil.url, { projectName: "Left alone" });
    const lost = buildTrace("lost", 5);
    const doubled = buildTrace("doubled", 7, lost.sessionId);
    const elsewhere = buildTrace("elsewhere", 3);
    for (const trace of [lost, doubled]) expect((await send(vigil.url, first.account.apiKey, first.account.projectSlug, trace)).status).toBe(200);
    expect((await send(vigil.url, second.account.apiKey, second.account.projectSlug, elsewhere)).status).toBe(200);
    await spanWriter.flush();

    const spanCounts = async () => {
      const result = await ch.client.query({
        query: `SELECT trace_id AS key, sum(span_count) AS spans FROM ${db}.traces GROUP BY trace_id
                UNION ALL SELECT session_id AS key, sum(span_count) AS spans FROM ${db}.sessions GROUP BY session_id`,
        format: "JSONEachRow",
      });
      return Object.fromEntries((await result.json<{ key: string; spans: number }>()).map(({ key, spans }) => [key, Number(spans)]));
    };
    const healthy = { [lost.traceId]: 5, [doubled.traceId]: 7, [lost.sessionId]: 12, [elsewhere.traceId]: 3, [elsewhere.sessionId]: 3 };
    expect(await spanCounts()).toEqual(healthy);

    // Damage as a crash or a manual repair might leave it: a trace's rows gone, another's and a session's doubled.
    const double = (table: string, column: string, value: string) =>
      ch.client.command({ query: `INSERT INTO ${db}.${table} SETTINGS insert_deduplicate = 0 SELECT * FROM ${db}.${table} WHERE ${column} = '${value}'` });
    await ch.client.command({ query: `DELETE FROM ${db}.traces WHERE trace_id = '${lost.traceId}'` });
    await double("traces", "trace_id", doubled.traceId);
    await double("sessions", "session_id", lost.sessionId);
    await double("traces", "trace_id", elsewhere.traceId);
    const damaged = { ...healthy, [doubled.traceId]: 14, [lost.sessionId]: 24, [elsewhere.traceId]: 6 };
    delete damaged[lost.traceId];
    expect(await spanCounts()).toEqual(damaged);

    // A time range without any of the spans changes nothing.
    const firstProject = await first.client.projects.get(first.account.projectSlug);
    const scope = { organizationId: firstProject.organizationId as string, projectId: firstProject.id as string };
    expect(await rebuildRollups(ch, { ...scope, to: new Date(Date.now() - 3_600_000) })).toEqual([
      { table: "analytics_hourly", rows: 0 },
      { table: "sessions", rows: 0 },
      { table: "traces", rows: 0 },
    ]);
    expect(await spanCounts()).toEqual(damaged);

    for (let run = 0; run < 2; run++) {
      const [hourly, ...rollups] = await rebuildRollups(ch, { ...scope, from: new Date(Date.now() - 3_600_000) });
      expect(hourly).toMatchObject({ table: "analytics_hourly", rows: expect.any(Number) });
      expect(rollups).toEqual([
        { table: "sessions", rows: 1 },
        { table: "traces", rows: 2 },
      ]);
      expect(await spanCounts()).toEqual({ ...healthy, [elsewhere.traceId]: 6 });
    }
    const detail = await first.client.traces.get(first.account.projectSlug, lost.traceId);
    expect(detail).toMatchObject({ spanCount: 5, tokensInput: 400, tokensOutput: 40, sessionId: lost.sessionId, rootSpanName: "turn lost" });

    // Without a scope: every roll-up.
    await rebuildRollups(ch, {});
    expect(await spanCounts()).toEqual(healthy);
    await vigil.stop();
  });

  test("`bun run rebuild-rollups` on a stopped Vigil's data directory, with the project by slug", async () => {
    const dataDir = join(testRoot, "rebuild-rollups-cli");
    rmSync(dataDir, { recursive: true, force: true });
    const vigil = await spawnVigil(dataDir);
    started.push(vigil);
    const { account } = await bootstrapAccount(vigil.url, { projectName: "Cli" });
    const traces = [buildTrace("cli-1", 4), buildTrace("cli-2", 6)];
    for (const trace of traces) expect((await send(vigil.url, account.apiKey, account.projectSlug, trace)).status).toBe(200);
    killGroup(vigil.child, "SIGTERM");
    expect(await vigil.exited).toBe(0);

    const run = async (...args: string[]) => {
      const proc = Bun.spawn(["bun", "run", "rebuild-rollups", ...args], {
        cwd: join(import.meta.dir, ".."),
        env: { ...process.env, DATA_DIR: dataDir, LOG_LEVEL: "warn" },
        stdout: "pipe",
        stderr: "pipe",
      });
      const [code, stdout, stderr] = await Promise.all([proc.exited, new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
      return { code, stdout: stdout.trim(), stderr: stderr.trim() };
    };
    for (let time = 0; time < 2; time++) {
      expect(await run("--project", account.projectSlug)).toMatchObject({ code: 0, stdout: expect.stringMatching(/^rebuilt \d+ analytics_hourly, 2 sessions, 2 traces from spans$/) });
    }
    const refused = await run("--from", "yesterday");
    expect(refused.code).toBe(2);
    expect(refused.stderr.split("\n").at(-1)).toBe("vigil: rebuild-rollups: --from: not an ISO 8601 instant: yesterday");
    await expectStoredOnce(dataDir, traces);
    rmSync(dataDir, { recursive: true, force: true });
  }, 180_000);
});
