import { beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { join } from "node:path";
import type { LatitudeClient } from "@latitude-data/sdk";
import type { Vigil } from "../src/server";
import { newId } from "../src/lib/ids";
import { AnnotationsService } from "../src/modules/annotations/service";
import { ScoresService } from "../src/modules/scores/service";
import { scoreStorage } from "../src/modules/scores/storage";
import { resolveTraceRef } from "../src/modules/scores/trace-ref";
import { bootstrapAccount, json, sharedVigil, testRoot } from "./helpers";
import { insertScoredTrace } from "./fixtures/scored-traces";
import { newSpanId, newTraceId } from "./fixtures/spans";
import { sdkFailure } from "./sdk";

setDefaultTimeout(60_000);

let vigil: Vigil;
let client: LatitudeClient;
let apiKey: string;
let projectSlug: string;
let project: { id: string; organizationId: string };

// Generous: the first suite to run also starts the embedded PostgreSQL server.
beforeAll(async () => {
  vigil = await sharedVigil();
  const created = await bootstrapAccount(vigil.url);
  client = created.client;
  apiKey = created.account.apiKey;
  projectSlug = created.account.projectSlug;
  project = await client.projects.get(projectSlug);
}, 60_000);

const post = (path: string, body: unknown, key = apiKey) =>
  fetch(vigil.url + path, { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body: JSON.stringify(body) });

const trace = (extra: Partial<Parameters<typeof insertScoredTrace>[1]> = {}) =>
  insertScoredTrace(vigil.ctx, { organizationId: project.organizationId, projectId: project.id, ...extra });

const scoreBody = (traceId: string) => ({ value: 0.25, passed: false, feedback: "Wrong tool chosen", trace: { by: "id" as const, id: traceId }, sourceId: "qa-script" });

/** Trace ids of the project's traces carrying `tag` that list traces returns for these filters; the `{error}` on a 400. */
async function tracesMatching(tag: string, filters: Record<string, { op: string; value: unknown }[]>) {
  const res = await post(`/v1/projects/${projectSlug}/traces/list`, { filters: { tags: [{ op: "eq", value: tag }], ...filters } });
  const body = await json(res);
  return res.status === 200 ? body.items.map((item: { traceId: string }) => item.traceId).sort() : body.error;
}
const sorted = (...ids: string[]) => ids.sort();
const eq = (value: unknown) => [{ op: "eq", value }];

async function copiedScores(where: string, params: Record<string, unknown>) {
  const { ch } = vigil.ctx;
  const result = await ch.client.query({ query: `SELECT * FROM ${ch.database}.scores FINAL WHERE ${where} ORDER BY id`, query_params: params, format: "JSONEachRow" });
  return result.json<Record<string, unknown>>();
}

describe("scores", () => {
  test("the SDK creates a custom score pinned to the trace's last LLM span and session", async () => {
    const { traceId, lastChatSpanId } = await trace({ sessionId: "session-a" });
    const res = await post(`/v1/projects/${projectSlug}/scores`, scoreBody(traceId));
    expect(res.status).toBe(201);
    const score = await client.scores.create(projectSlug, { body: { ...scoreBody(traceId), duration: 1500, tokens: 12, cost: 340, metadata: { run: 7, note: null } } });
    expect(score).toEqual({
      id: expect.stringMatching(/^[a-z][a-z0-9]{23}$/),
      organizationId: project.organizationId,
      projectId: project.id,
      sessionId: "session-a",
      traceId,
      spanId: lastChatSpanId,
      simulationId: null,
      signalId: null,
      value: 0.25,
      passed: false,
      feedback: "Wrong tool chosen",
      error: null,
      errored: false,
      duration: 1500,
      tokens: 12,
      cost: 340,
      draftedAt: null,
      annotatorId: null,
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
      source: "custom",
      sourceId: "qa-script",
      metadata: { run: 7, note: null },
    } as never);
    expect(new Date(score.createdAt).toISOString()).toBe(score.createdAt);
  });

  test("a trace ingested over OTLP/HTTP is scored on its last LLM completion and annotated on its conversation", async () => {
    const traceId = newTraceId();
    const [rootSpanId, firstChatSpanId, lastChatSpanId] = [newSpanId(), newSpanId(), newSpanId()];
    const start = BigInt(Date.now() - 10_000) * 1_000_000n;
    const at = (ms: number) => String(start + BigInt(ms) * 1_000_000n);
    const text = (key: string, value: string) => ({ key, value: { stringValue: value } });
    const chat = (spanId: string, from: number, to: number, answer: string) => ({
      traceId,
      spanId,
      parentSpanId: rootSpanId,
      name: "chat gpt-4o",
      kind: 3,
      startTimeUnixNano: at(from),
      endTimeUnixNano: at(to),
      attributes: [
        text("gen_ai.operation.name", "chat"),
        text("gen_ai.request.model", "gpt-4o"),
        text("session.id", "otlp-session"),
        text("gen_ai.input.messages", JSON.stringify([{ role: "user", parts: [{ type: "text", content: "Capital of France?" }] }])),
        text("gen_ai.output.messages", JSON.stringify([{ role: "assistant", parts: [{ type: "text", content: answer }] }])),
      ],
    });
    const body = {
      resourceSpans: [
        {
          resource: { attributes: [text("service.name", "agent")] },
          scopeSpans: [
            {
              scope: { name: "test" },
              spans: [
                { traceId, spanId: rootSpanId, name: "agent", kind: 1, startTimeUnixNano: at(0), endTimeUnixNano: at(3000), attributes: [text("session.id", "otlp-session")] },
                chat(firstChatSpanId, 100, 900, "Lyon"),
                chat(lastChatSpanId, 1000, 2500, "Paris"),
              ],
            },
          ],
        },
      ],
    };
    const ingest = await fetch(`${vigil.url}/v1/traces`, {
      method: "POST",
      headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json", "x-latitude-project": projectSlug },
      body: JSON.stringify(body),
    });
    expect(ingest.status).toBe(200);

    // Acknowledged spans may still be on their way from the write-ahead log to ClickHouse.
    let score: Awaited<ReturnType<typeof client.scores.create>> | null = null;
    for (let attempt = 0; !score && attempt < 100; attempt++) {
      score = await client.scores.create(projectSlug, { body: scoreBody(traceId) }).catch(async (error: unknown) => {
        if ((error as { statusCode?: number }).statusCode !== 404) throw error;
        await Bun.sleep(50);
        return null;
      });
    }
    expect(score).toMatchObject({ traceId, spanId: lastChatSpanId, sessionId: "otlp-session" });
    const annotation = await client.annotations.create(projectSlug, {
      value: 0,
      passed: false,
      feedback: "Paris is right, but say it in a sentence",
      trace: { by: "id", id: traceId },
      anchor: { messageIndex: 1, partIndex: 0, startOffset: 0, endOffset: 5 },
    });
    expect(annotation).toMatchObject({ spanId: lastChatSpanId, metadata: { messageIndex: 1, endOffset: 5 } });
    const beyond = await sdkFailure(
      client.annotations.create(projectSlug, { value: 0, passed: false, feedback: "x", trace: { by: "id", id: traceId }, anchor: { messageIndex: 1, partIndex: 0, startOffset: 0, endOffset: 6 } }),
    );
    expect(beyond.body.error).toBe("anchor.endOffset: part 0 of message 1 is 5 characters long");
  });

  test("the documented flat body on the organization route keeps its span and session", async () => {
    const { traceId, rootSpanId } = await trace({ sessionId: "from-trace" });
    const res = await post(`/v1/organizations/${project.organizationId}/projects/${project.id}/scores`, {
      traceId,
      value: 1,
      passed: true,
      feedback: "fine",
      source_id: "nightly",
      spanId: rootSpanId,
      sessionId: "explicit-session",
      metadata: { build: "abc" },
    });
    expect(res.status).toBe(201);
    const score = await json(res);
    expect(score).toMatchObject({ traceId, spanId: rootSpanId, sessionId: "explicit-session", sourceId: "nightly", source: "custom", passed: true, metadata: { build: "abc" } });
    const bySlug = await post(`/v1/organizations/${project.organizationId}/projects/${projectSlug}/scores`, { traceId, value: 0, passed: false, feedback: "", source_id: "x" });
    expect(bySlug.status).toBe(201);
    expect(await json(bySlug)).toMatchObject({ sessionId: "from-trace", feedback: "" });
  });

  test("an error marks the score errored; an empty error is a 400", async () => {
    const { traceId } = await trace();
    const score = await client.scores.create(projectSlug, { body: { ...scoreBody(traceId), error: "judge timed out" } });
    expect(score).toMatchObject({ error: "judge timed out", errored: true });
    const res = await post(`/v1/projects/${projectSlug}/scores`, { ...scoreBody(traceId), error: "" });
    expect(res.status).toBe(400);
    expect((await json(res)).error).toStartWith("error:");
  });

  test("values, source ids and session ids out of range are 400s naming the field", async () => {
    const { traceId } = await trace();
    const cases: [unknown, string][] = [
      [{ ...scoreBody(traceId), value: 1.01 }, "value:"],
      [{ ...scoreBody(traceId), value: -0.1 }, "value:"],
      [{ ...scoreBody(traceId), sourceId: "" }, "sourceId:"],
      [{ ...scoreBody(traceId), sourceId: "s".repeat(129) }, "sourceId:"],
      [{ traceId, value: 0.5, passed: true, feedback: "ok", source_id: "x", sessionId: "s".repeat(129) }, "sessionId:"],
      [{ traceId, value: 0.5, passed: true, feedback: "ok" }, "source_id:"],
      [{ value: 0.5, passed: true, feedback: "ok", sourceId: "x" }, "trace:"],
      [{ ...scoreBody(traceId), trace: { by: "id", id: "short" } }, "trace"],
    ];
    for (const [body, field] of cases) {
      const res = await post(`/v1/projects/${projectSlug}/scores`, body);
      expect(res.status).toBe(400);
      expect((await json(res)).error).toStartWith(field);
    }
    const accepted = await post(`/v1/projects/${projectSlug}/scores`, { ...scoreBody(traceId), sourceId: "s".repeat(128), value: 1 });
    expect(accepted.status).toBe(201);
  });

  test("the evaluation variant is internal: an API key gets a 400", async () => {
    const { traceId } = await trace();
    const failure = await sdkFailure(
      client.scores.create(projectSlug, {
        body: { ...scoreBody(traceId), _evaluation: true, sourceId: "a".repeat(24), metadata: { evaluationHash: "h" } },
      }),
    );
    expect(failure.statusCode).toBe(400);
    expect(failure.body.error).toStartWith("_evaluation:");
    const flat = { traceId, value: 0.5, passed: true, feedback: "ok", source_id: "a".repeat(24), metadata: { evaluationHash: "h" } };
    for (const path of [`/v1/projects/${projectSlug}/scores`, `/v1/organizations/${project.organizationId}/projects/${project.id}/scores`]) {
      const res = await post(path, { ...flat, _evaluation: true });
      expect({ path, status: res.status, error: (await json(res)).error }).toEqual({ path, status: 400, error: expect.stringMatching(/^_evaluation:/) });
    }
    expect((await post(`/v1/projects/${projectSlug}/scores`, { ...flat, _evaluation: "yes" })).status).toBe(400);
    expect((await post(`/v1/projects/${projectSlug}/scores`, { ...flat, _evaluation: false })).status).toBe(201);
  });

  test("the machine-readable body on the organization route", async () => {
    const { traceId, lastChatSpanId } = await trace({ sessionId: "org-route" });
    for (const projectRef of [project.id, projectSlug]) {
      const res = await post(`/v1/organizations/${project.organizationId}/projects/${projectRef}/scores`, { ...scoreBody(traceId), tokens: 3 });
      expect(res.status).toBe(201);
      expect(await json(res)).toMatchObject({ traceId, spanId: lastChatSpanId, sessionId: "org-route", source: "custom", sourceId: "qa-script", tokens: 3 });
    }
  });

  test("a flat-form spanId must be a span of the trace", async () => {
    const { traceId, rootSpanId } = await trace();
    const other = await trace();
    const flat = { traceId, value: 1, passed: true, feedback: "ok", source_id: "x" };
    for (const spanId of [newSpanId(), other.lastChatSpanId]) {
      const res = await post(`/v1/projects/${projectSlug}/scores`, { ...flat, spanId });
      expect(res.status).toBe(400);
      expect((await json(res)).error).toBe(`spanId: trace ${traceId} has no span ${spanId}`);
    }
    const upper = await post(`/v1/projects/${projectSlug}/scores`, { ...flat, spanId: rootSpanId.toUpperCase() });
    expect(upper.status).toBe(201);
    expect(await json(upper)).toMatchObject({ spanId: rootSpanId });
  });

  test("a trace's session id longer than 128 characters is not lifted: the score's sessionId is null", async () => {
    const { traceId } = await trace({ sessionId: "s".repeat(200) });
    expect(await client.scores.create(projectSlug, { body: scoreBody(traceId) })).toMatchObject({ traceId, sessionId: null });
    const flat = await post(`/v1/projects/${projectSlug}/scores`, { traceId, value: 1, passed: true, feedback: "ok", source_id: "x" });
    expect(flat.status).toBe(201);
    expect(await json(flat)).toMatchObject({ traceId, sessionId: null });
    const annotation = await client.annotations.create(projectSlug, { value: 0, passed: false, feedback: "long session", trace: { by: "id", id: traceId } });
    expect(annotation).toMatchObject({ traceId, sessionId: null });

    const longest = await trace({ sessionId: "s".repeat(128) });
    expect(await client.scores.create(projectSlug, { body: scoreBody(longest.traceId) })).toMatchObject({ sessionId: "s".repeat(128) });
  });

  test("an unknown trace is a 404; another organization's ids are 404s", async () => {
    const missing = await sdkFailure(client.scores.create(projectSlug, { body: scoreBody(newTraceId()) }));
    expect(missing.statusCode).toBe(404);
    const { traceId } = await trace();
    const other = await bootstrapAccount(vigil.url);
    const otherProject = await other.client.projects.get(other.account.projectSlug);
    const foreignOrg = await post(`/v1/organizations/${otherProject.organizationId}/projects/${otherProject.id}/scores`, scoreBody(traceId));
    expect(foreignOrg.status).toBe(404);
    const foreignOrgOwnProject = await post(`/v1/organizations/${otherProject.organizationId}/projects/${project.id}/scores`, scoreBody(traceId));
    expect(foreignOrgOwnProject.status).toBe(404);
    const otherOnly = await other.client.projects.create({ name: "Only elsewhere" });
    expect((await post(`/v1/projects/${otherOnly.slug}/scores`, scoreBody(traceId))).status).toBe(404);
    const otherOrganizationsTrace = await sdkFailure(other.client.scores.create(other.account.projectSlug, { body: scoreBody(traceId) }));
    expect(otherOrganizationsTrace.statusCode).toBe(404);
  });

  test("TraceRef by filters must match exactly one trace; the 400 says how many matched", async () => {
    const userId = `user-${crypto.randomUUID()}`;
    const byUser = { by: "filters" as const, filters: { userId: [{ op: "eq" as const, value: userId }] } };
    const none = await sdkFailure(client.scores.create(projectSlug, { body: { ...scoreBody(newTraceId()), trace: byUser } }));
    expect(none.statusCode).toBe(400);
    expect(none.body.error).toBe("trace.filters: must match exactly one trace; they match 0 traces");

    const { traceId, lastChatSpanId } = await trace({ userId, sessionId: "only-one" });
    const score = await client.scores.create(projectSlug, { body: { ...scoreBody(newTraceId()), trace: byUser } });
    expect(score).toMatchObject({ traceId, spanId: lastChatSpanId, sessionId: "only-one" });

    await trace({ userId });
    const two = await sdkFailure(client.scores.create(projectSlug, { body: { ...scoreBody(newTraceId()), trace: byUser } }));
    expect(two.statusCode).toBe(400);
    expect(two.body.error).toBe("trace.filters: must match exactly one trace; they match 2 traces");

    const unknownField = await post(`/v1/projects/${projectSlug}/scores`, { ...scoreBody(traceId), trace: { by: "filters", filters: { colour: [{ op: "eq", value: "red" }] } } });
    expect(unknownField.status).toBe(400);
    expect((await json(unknownField)).error).toBe("trace.filters.colour: unknown filter field");
    const badBy = await post(`/v1/projects/${projectSlug}/scores`, { ...scoreBody(traceId), trace: { by: "name", name: "x" } });
    expect((await json(badBy)).error).toBe("trace.by: must be one of: id, filters");
  });

  test("score.* filters on list traces find traces by their published scores", async () => {
    const tag = `scored-${crypto.randomUUID()}`;
    const failing = await trace({ tags: [tag] });
    const passing = await trace({ tags: [tag] });
    const unscored = await trace({ tags: [tag] });
    const sourceId = `pipeline-${crypto.randomUUID()}`;
    await client.scores.create(projectSlug, { body: { ...scoreBody(failing.traceId), sourceId, value: 0.1 } });
    await client.scores.create(projectSlug, { body: { ...scoreBody(failing.traceId), sourceId: "judge", error: "timeout" } });
    await client.scores.create(projectSlug, { body: { ...scoreBody(passing.traceId), sourceId, value: 0.9, passed: true } });
    await scoreStorage(vigil.ctx).copier.drain();

    const matching = (filters: Record<string, { op: string; value: unknown }[]>) => tracesMatching(tag, filters);
    expect(await matching({ "score.passed": [{ op: "eq", value: false }] })).toEqual([failing.traceId]);
    expect(await matching({ "score.passed": [{ op: "eq", value: true }] })).toEqual([passing.traceId]);
    expect(await matching({ "score.errored": [{ op: "eq", value: true }] })).toEqual([failing.traceId]);
    expect(await matching({ "score.value": [{ op: "gte", value: 0.5 }] })).toEqual([passing.traceId]);
    expect(await matching({ "score.sourceId": [{ op: "eq", value: "judge" }] })).toEqual([failing.traceId]);
    expect(await matching({ "score.source": [{ op: "eq", value: "custom" }] })).toEqual(sorted(failing.traceId, passing.traceId));
    expect(await matching({ "score.source": [{ op: "eq", value: "annotation" }] })).toEqual([]);
    expect(await matching({ "score.sourceId": [{ op: "in", value: [sourceId] }], "score.value": [{ op: "lt", value: 0.5 }] })).toEqual([failing.traceId]);
    expect(await matching({ "score.sourceId": [{ op: "neq", value: sourceId }] })).toEqual([unscored.traceId]);
    expect(await matching({ "score.signalId": [{ op: "notIn", value: ["x"] }], "score.simulationId": [{ op: "eq", value: "" }] })).toEqual(sorted(failing.traceId, passing.traceId));
    expect(await matching({ "score.flavour": [{ op: "eq", value: "x" }] })).toBe("filters.score.flavour: unknown filter field");
    expect(await matching({ "score.source": [{ op: "eq", value: "robot" }] })).toStartWith("filters.score.source[0].value must be one of");

    // The same compiled filters pick the trace of a TraceRef.
    const viaTraceRef = await resolveTraceRef(vigil.ctx.ch, project.organizationId, project.id, {
      by: "filters",
      filters: { tags: [{ op: "eq", value: tag }], "score.errored": [{ op: "eq", value: true }] },
    });
    expect(viaTraceRef.traceId).toBe(failing.traceId);
  });

  test("score.annotatorId, score.signalId and score.simulationId match published scores only, drafts excluded", async () => {
    const tag = `ids-${crypto.randomUUID()}`;
    const tagged = () => trace({ tags: [tag] });
    const [annotated, userScored, simulated, drafted] = [await tagged(), await tagged(), await tagged(), await tagged()];
    const [userId, signalId, draftSignalId, simulationId] = [newId(), newId(), newId(), newId()];
    await vigil.ctx.sql`INSERT INTO users (id, email) VALUES (${userId}, ${`${userId}@example.com`})`;
    const user = { organizationId: project.organizationId, kind: "oauth" as const, apiKeyId: null, userId };
    await client.annotations.create(projectSlug, { value: 0, passed: false, feedback: "Wrong answer", trace: { by: "id", id: annotated.traceId }, signalId });
    await new ScoresService(vigil.ctx).createCustom(user, project.id, { ...scoreBody(userScored.traceId), passed: true });
    await client.scores.create(projectSlug, { body: { ...scoreBody(simulated.traceId), simulationId } });
    const draft = await new AnnotationsService(vigil.ctx).createSystemDraft({
      organizationId: project.organizationId,
      projectId: project.id,
      traceId: drafted.traceId,
      value: 0,
      passed: false,
      feedback: "flagged",
      signalId: draftSignalId,
    });
    const { copier } = scoreStorage(vigil.ctx);
    await copier.drain();

    const matching = (filters: Record<string, { op: string; value: unknown }[]>) => tracesMatching(tag, filters);
    expect(await matching({ "score.annotatorId": eq(userId) })).toEqual([userScored.traceId]);
    expect(await matching({ "score.annotatorId": [{ op: "neq", value: userId }] })).toEqual(sorted(annotated.traceId, simulated.traceId, drafted.traceId));
    expect(await matching({ "score.signalId": eq(signalId) })).toEqual([annotated.traceId]);
    expect(await matching({ "score.simulationId": eq(simulationId) })).toEqual([simulated.traceId]);
    expect(await matching({ "score.simulationId": [{ op: "in", value: [simulationId, signalId] }] })).toEqual([simulated.traceId]);
    expect(await matching({ "score.signalId": eq(draftSignalId) })).toEqual([]);
    expect(await matching({ "score.passed": eq(false) })).toEqual(sorted(annotated.traceId, simulated.traceId));

    expect((await post(`/v1/projects/${projectSlug}/annotations/${draft.id}/publish`, {})).status).toBe(200);
    await copier.drain();
    expect(await matching({ "score.signalId": eq(draftSignalId) })).toEqual([drafted.traceId]);
    expect(await matching({ "score.passed": eq(false) })).toEqual(sorted(annotated.traceId, simulated.traceId, drafted.traceId));
  });

  test("the ClickHouse copy lands through the outbox, and a rebuild changes nothing", async () => {
    const { traceId } = await trace();
    const score = await client.scores.create(projectSlug, { body: scoreBody(traceId) });
    // A deleted row stays in PostgreSQL and becomes a tombstone in the copy, which FINAL hides.
    const deleted = await client.annotations.create(projectSlug, { value: 0, passed: false, feedback: "withdrawn", trace: { by: "id", id: traceId } });
    await client.annotations.delete(projectSlug, deleted.id);
    const { copier } = scoreStorage(vigil.ctx);
    await copier.drain();
    const [copy] = await copiedScores("id = {id:String}", { id: score.id });
    expect(copy).toMatchObject({
      organization_id: project.organizationId,
      project_id: project.id,
      trace_id: traceId,
      source: "custom",
      source_id: "qa-script",
      passed: false,
      errored: false,
      value: 0.25,
      deleted: 0,
      version: 1,
      drafted_at: null,
    });
    const { ch, sql } = vigil.ctx;
    const copiedInProject = async () => {
      const result = await ch.client.query({
        query: `SELECT count() AS n FROM ${ch.database}.scores FINAL WHERE project_id = {projectId:String}`,
        query_params: { projectId: project.id },
        format: "JSONEachRow",
      });
      return (await result.json<{ n: number }>())[0]!.n;
    };
    const [{ live }] = await sql<{ live: number }[]>`SELECT count(*)::int AS live FROM scores WHERE project_id = ${project.id} AND deleted_at IS NULL`;
    expect(await copiedInProject()).toBe(live);
    // Every row is copied again, deleted ones included, so that the copy learns of the deletion.
    const [{ total }] = await sql<{ total: number }[]>`SELECT count(*)::int AS total FROM scores`;
    expect(await copier.rebuild()).toBe(total);
    expect(await copier.rebuild()).toBe(total);
    expect(await copiedInProject()).toBe(live);
    expect(await copiedScores("id = {id:String}", { id: deleted.id })).toEqual([]);
    expect((await copiedScores("id = {id:String}", { id: score.id }))[0]).toEqual(copy!);
  });

  test("the copy is rebuilt from PostgreSQL after it is lost", async () => {
    const { traceId } = await trace();
    const score = await client.scores.create(projectSlug, { body: scoreBody(traceId) });
    const { copier } = scoreStorage(vigil.ctx);
    await copier.drain();
    const { ch } = vigil.ctx;
    await ch.client.command({ query: `ALTER TABLE ${ch.database}.scores DELETE WHERE id = {id:String}`, query_params: { id: score.id }, clickhouse_settings: { mutations_sync: "1" } });
    expect(await copiedScores("id = {id:String}", { id: score.id })).toHaveLength(0);
    await copier.rebuild();
    expect(await copiedScores("id = {id:String}", { id: score.id })).toHaveLength(1);
  });

  test("`bun run rebuild-score-copy` rebuilds a lost ClickHouse copy from PostgreSQL", async () => {
    const { traceId } = await trace();
    const score = await client.scores.create(projectSlug, { body: scoreBody(traceId) });
    // The command's own data directory: a fresh chdb engine, so its ClickHouse copy starts out lost.
    const dataDir = join(testRoot, `cli-${crypto.randomUUID()}`);
    const env = { ...process.env, DATA_DIR: dataDir, CHDB_PATH: join(dataDir, "ch"), CLICKHOUSE_URL: "", CLICKHOUSE_DATABASE: "rebuilt" };
    const run = async (cmd: string[], extraEnv: Record<string, string> = {}) => {
      const proc = Bun.spawn(cmd, { cwd: join(import.meta.dir, ".."), env: { ...env, ...extraEnv }, stdout: "pipe", stderr: "pipe" });
      const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
      return { code, stdout: stdout.trim(), stderr: stderr.trim() };
    };

    const [{ total }] = await vigil.ctx.sql<{ total: number }[]>`SELECT count(*)::int AS total FROM scores`;
    const rebuilt = await run(["bun", "run", "rebuild-score-copy"], { DATABASE_URL: vigil.ctx.config.databaseUrl!, LOG_LEVEL: "warn" });
    expect(rebuilt).toEqual({ code: 0, stdout: `rebuilt the ClickHouse copy of ${total} scores`, stderr: expect.any(String) });

    const read = await run([
      "bun",
      "-e",
      `const { Session } = require("chdb");
       const session = new Session(${JSON.stringify(join(dataDir, "ch"))});
       process.stdout.write(session.query("SELECT id, trace_id, source_id, deleted FROM rebuilt.scores FINAL WHERE id = '${score.id}'", "JSONEachRow"));
       session.cleanup();`,
    ]);
    expect(JSON.parse(read.stdout)).toEqual({ id: score.id, trace_id: traceId, source_id: "qa-script", deleted: 0 });

    const badConfig = await run(["bun", "run", "src/cli.ts", "rebuild-score-copy"], { DATABASE_URL: "mysql://nowhere" });
    expect(badConfig).toMatchObject({ code: 2, stderr: "vigil: invalid configuration: DATABASE_URL must use postgres or postgresql, got mysql" });
    const unknown = await run(["bun", "run", "src/cli.ts", "rebuild-everything"]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("rebuild-score-copy");
  });

  test("published failed scores with feedback are recorded for discovery; passed, errored and blank ones are not", async () => {
    const { traceId } = await trace();
    const failed = await client.scores.create(projectSlug, { body: scoreBody(traceId) });
    const passed = await client.scores.create(projectSlug, { body: { ...scoreBody(traceId), passed: true } });
    const errored = await client.scores.create(projectSlug, { body: { ...scoreBody(traceId), error: "boom" } });
    const blank = await client.scores.create(projectSlug, { body: { ...scoreBody(traceId), feedback: "  " } });
    const events = await vigil.ctx.sql<{ score_id: string; project_id: string; consumed_at: Date | null }[]>`
      SELECT score_id, project_id, consumed_at FROM failed_score_events
      WHERE score_id IN ${vigil.ctx.sql([failed.id, passed.id, errored.id, blank.id])}`;
    expect([...events]).toEqual([{ score_id: failed.id, project_id: project.id, consumed_at: null }]);
  });
});
