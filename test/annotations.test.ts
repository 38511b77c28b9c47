import { beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import type { LatitudeClient } from "@latitude-data/sdk";
import type { Vigil } from "../src/server";
import { AnnotationsService } from "../src/modules/annotations/service";
import { countSignalScoresPerHour } from "../src/modules/scores/analytics";
import { scoreStorage } from "../src/modules/scores/storage";
import { newId } from "../src/lib/ids";
import { bootstrapAccount, json, sharedVigil } from "./helpers";
import { insertScoredTrace } from "./fixtures/scored-traces";
import { newTraceId } from "./fixtures/spans";
import { sdkFailure } from "./sdk";

setDefaultTimeout(60_000);

let vigil: Vigil;
let client: LatitudeClient;
let apiKey: string;
let projectSlug: string;
let project: { id: string; organizationId: string };
let system: AnnotationsService;

// Generous: the first suite to run also starts the embedded PostgreSQL server.
beforeAll(async () => {
  vigil = await sharedVigil();
  const created = await bootstrapAccount(vigil.url);
  client = created.client;
  apiKey = created.account.apiKey;
  projectSlug = created.account.projectSlug;
  project = await client.projects.get(projectSlug);
  system = new AnnotationsService(vigil.ctx);
}, 60_000);

const request = (method: string, path: string, body?: unknown) =>
  fetch(vigil.url + path, {
    method,
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });

const conversationTrace = () =>
  insertScoredTrace(vigil.ctx, {
    organizationId: project.organizationId,
    projectId: project.id,
    sessionId: "chat-42",
    system: [{ type: "text", content: "You are terse." }],
    input: [{ role: "user", parts: [{ type: "text", content: "What is 2+2?" }] }],
    output: [
      {
        role: "assistant",
        parts: [
          { type: "text", content: "It is 5." },
          { type: "tool_call", id: "c1", name: "calc", arguments: { expression: "2+2" } },
        ],
      },
    ],
  });

const annotation = (traceId: string, extra: Record<string, unknown> = {}) => ({
  value: 0,
  passed: false,
  feedback: "The arithmetic is wrong",
  trace: { by: "id" as const, id: traceId },
  ...extra,
});

describe("annotations", () => {
  test("the SDK creates, reads, edits and deletes an annotation", async () => {
    const { traceId, lastChatSpanId } = await conversationTrace();
    const created = await client.annotations.create(projectSlug, annotation(traceId, { anchor: { messageIndex: 2, partIndex: 0, startOffset: 6, endOffset: 7 } }));
    expect(created).toEqual({
      id: expect.stringMatching(/^[a-z][a-z0-9]{23}$/),
      organizationId: project.organizationId,
      projectId: project.id,
      sessionId: "chat-42",
      traceId,
      spanId: lastChatSpanId,
      simulationId: null,
      signalId: null,
      value: 0,
      passed: false,
      feedback: "The arithmetic is wrong",
      error: null,
      errored: false,
      duration: 0,
      tokens: 0,
      cost: 0,
      draftedAt: null,
      annotatorId: null,
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
      source: "annotation",
      sourceId: "API",
      metadata: { rawFeedback: "The arithmetic is wrong", messageIndex: 2, partIndex: 0, startOffset: 6, endOffset: 7 },
    } as never);
    expect(await client.annotations.get(projectSlug, created.id)).toEqual(created);

    const edited = await client.annotations.update(projectSlug, created.id, { value: 0.5, feedback: "Off by one" });
    expect(edited).toMatchObject({ value: 0.5, passed: false, feedback: "Off by one", metadata: { rawFeedback: "Off by one", messageIndex: 2, endOffset: 7 } });
    expect(edited.updatedAt >= created.updatedAt).toBe(true);
    expect(await client.annotations.update(projectSlug, created.id, { passed: true })).toMatchObject({ value: 0.5, passed: true, feedback: "Off by one" });

    await client.annotations.delete(projectSlug, created.id);
    expect((await sdkFailure(client.annotations.get(projectSlug, created.id))).statusCode).toBe(404);
    expect((await sdkFailure(client.annotations.update(projectSlug, created.id, { value: 1 }))).statusCode).toBe(404);
    expect((await sdkFailure(client.annotations.delete(projectSlug, created.id))).statusCode).toBe(404);
  });

  test("the documented body on the organization route: traceId, issueId and anchor fields at the top level", async () => {
    const { traceId } = await conversationTrace();
    const signalId = newId();
    const base = `/v1/organizations/${project.organizationId}/projects/${project.id}/annotations`;
    const res = await request("POST", base, { traceId, value: 1, passed: true, feedback: "Good tone", issueId: signalId, messageIndex: 1 });
    expect(res.status).toBe(201);
    const created = await json(res);
    expect(created).toMatchObject({ traceId, signalId, passed: true, sourceId: "API", source: "annotation", metadata: { rawFeedback: "Good tone", messageIndex: 1 } });

    const read = await request("GET", `${base}/${created.id}`);
    expect(read.status).toBe(200);
    expect(await json(read)).toEqual(created);
    const patched = await request("PATCH", `${base}/${created.id}`, { passed: false });
    expect(await json(patched)).toMatchObject({ passed: false, feedback: "Good tone" });
    const listed = await request("GET", `/v1/organizations/${project.organizationId}/projects/${projectSlug}/traces/${traceId}/annotations`);
    expect((await json(listed)).items.map((item: { id: string }) => item.id)).toEqual([created.id]);
    expect((await request("DELETE", `${base}/${created.id}`)).status).toBe(204);
    expect((await request("GET", `${base}/${created.id}`)).status).toBe(404);

    const both = await request("POST", base, { ...annotation(traceId), traceId });
    expect(both.status).toBe(400);
    expect((await json(both)).error).toStartWith("trace:");
    const neither = await request("POST", base, { value: 1, passed: true, feedback: "x" });
    expect(neither.status).toBe(400);
    expect((await json(neither)).error).toStartWith("trace:");
  });

  test("a user credential's annotation is authored by the user: sourceId and annotatorId are the user's id", async () => {
    const { traceId } = await conversationTrace();
    const userId = newId();
    await vigil.ctx.sql`INSERT INTO users (id, email) VALUES (${userId}, ${`${userId}@example.com`})`;
    const principal = { organizationId: project.organizationId, kind: "oauth" as const, apiKeyId: null, userId };
    const created = await system.create(principal, project.id, annotation(traceId));
    expect(created).toMatchObject({ annotatorId: userId, sourceId: userId, draftedAt: null });
    expect(await client.annotations.get(projectSlug, created.id)).toMatchObject({ annotatorId: userId, sourceId: userId });
    expect(await client.annotations.create(projectSlug, annotation(traceId))).toMatchObject({ annotatorId: null, sourceId: "API" });
  });

  test("value must be within [0, 1] on create and on edit", async () => {
    const { traceId } = await conversationTrace();
    for (const value of [-0.01, 1.01]) {
      const res = await request("POST", `/v1/projects/${projectSlug}/annotations`, annotation(traceId, { value }));
      expect(res.status).toBe(400);
      expect((await json(res)).error).toStartWith("value:");
    }
    const created = await client.annotations.create(projectSlug, annotation(traceId, { value: 1 }));
    for (const value of [-0.01, 1.01]) {
      const res = await request("PATCH", `/v1/projects/${projectSlug}/annotations/${created.id}`, { value });
      expect(res.status).toBe(400);
      expect((await json(res)).error).toStartWith("value:");
    }
    expect(await client.annotations.get(projectSlug, created.id)).toMatchObject({ value: 1 });
  });

  test("signalId and its alias issueId together, or an anchor both in `anchor` and at the top level, are 400s", async () => {
    const { traceId } = await conversationTrace();
    const both = await request("POST", `/v1/projects/${projectSlug}/annotations`, annotation(traceId, { signalId: newId(), issueId: newId() }));
    expect(both.status).toBe(400);
    expect((await json(both)).error).toBe("signalId: send signalId or its alias issueId, not both");
    const twoAnchors = await request("POST", `/v1/projects/${projectSlug}/annotations`, annotation(traceId, { anchor: { messageIndex: 1 }, messageIndex: 2 }));
    expect(twoAnchors.status).toBe(400);
    expect((await json(twoAnchors)).error).toBe("anchor: send the anchor fields inside anchor or at the top level, not both");
    const oneAnchor = await request("POST", `/v1/projects/${projectSlug}/annotations`, annotation(traceId, { anchor: { messageIndex: 1 } }));
    expect(await json(oneAnchor)).toMatchObject({ metadata: { messageIndex: 1 } });
  });

  test("an annotation's trace by TraceRef filters must match exactly one trace", async () => {
    const userId = `user-${crypto.randomUUID()}`;
    const byUser = { by: "filters" as const, filters: { userId: [{ op: "eq" as const, value: userId }] } };
    const none = await sdkFailure(client.annotations.create(projectSlug, annotation(newTraceId(), { trace: byUser })));
    expect(none.statusCode).toBe(400);
    expect(none.body.error).toBe("trace.filters: must match exactly one trace; they match 0 traces");
    const { traceId, lastChatSpanId } = await insertScoredTrace(vigil.ctx, { organizationId: project.organizationId, projectId: project.id, userId, sessionId: "by-filters" });
    const created = await client.annotations.create(projectSlug, annotation(newTraceId(), { trace: byUser, anchor: { messageIndex: 0 } }));
    expect(created).toMatchObject({ traceId, spanId: lastChatSpanId, sessionId: "by-filters", metadata: { messageIndex: 0 } });
    await insertScoredTrace(vigil.ctx, { organizationId: project.organizationId, projectId: project.id, userId });
    const two = await sdkFailure(client.annotations.create(projectSlug, annotation(newTraceId(), { trace: byUser })));
    expect(two.body.error).toBe("trace.filters: must match exactly one trace; they match 2 traces");
  });

  test("feedback must not be empty", async () => {
    const { traceId } = await conversationTrace();
    for (const feedback of ["", "   "]) {
      const res = await request("POST", `/v1/projects/${projectSlug}/annotations`, annotation(traceId, { feedback }));
      expect(res.status).toBe(400);
      expect((await json(res)).error).toStartWith("feedback:");
    }
    const created = await client.annotations.create(projectSlug, annotation(traceId));
    const blanked = await request("PATCH", `/v1/projects/${projectSlug}/annotations/${created.id}`, { feedback: " " });
    expect(blanked.status).toBe(400);
  });

  test("every anchor rule violation is a 400 naming the rule", async () => {
    const { traceId } = await conversationTrace();
    // conversation: 0 system, 1 user "What is 2+2?", 2 assistant ["It is 5." (8 chars), tool call {"expression":"2+2"}]
    const violations: [Record<string, unknown>, string][] = [
      [{ partIndex: 0 }, "anchor.partIndex: requires anchor.messageIndex"],
      [{ messageIndex: 2, partIndex: 0, startOffset: 1 }, "anchor.startOffset and anchor.endOffset: must be sent together"],
      [{ messageIndex: 2, partIndex: 0, endOffset: 3 }, "anchor.startOffset and anchor.endOffset: must be sent together"],
      [{ messageIndex: 2, startOffset: 0, endOffset: 3 }, "anchor.startOffset: requires anchor.partIndex"],
      [{ messageIndex: 2, partIndex: 0, startOffset: 5, endOffset: 4 }, "anchor.endOffset: must be greater than or equal to anchor.startOffset"],
      [{ messageIndex: 2, partIndex: 0, startOffset: 0, endOffset: 3, textFormat: "markdown" }, "anchor.textFormat:"],
      [{ messageIndex: 3 }, "anchor.messageIndex: the trace's conversation has 3 messages"],
      [{ messageIndex: 2, partIndex: 2 }, "anchor.partIndex: message 2 has 2 parts"],
      [{ messageIndex: 2, partIndex: 0, startOffset: 0, endOffset: 9 }, "anchor.endOffset: part 0 of message 2 is 8 characters long"],
      [{ messageIndex: 2, partIndex: 1, startOffset: 0, endOffset: 30, textFormat: "pretty-json" }, "anchor.endOffset: part 1 of message 2 is 25 characters long"],
      [{ messageIndex: -1 }, "anchor.messageIndex:"],
    ];
    for (const [anchor, message] of violations) {
      const res = await request("POST", `/v1/projects/${projectSlug}/annotations`, annotation(traceId, { anchor }));
      expect({ anchor, status: res.status, error: (await json(res)).error }).toEqual({ anchor, status: 400, error: expect.stringContaining(message) });
    }
    const topLevel = await request("POST", `/v1/projects/${projectSlug}/annotations`, { ...annotation(traceId), partIndex: 0 });
    expect((await json(topLevel)).error).toBe("anchor.partIndex: requires anchor.messageIndex");

    const valid = [
      { messageIndex: 2, partIndex: 0, startOffset: 6, endOffset: 8 },
      { messageIndex: 2, partIndex: 0, startOffset: 3, endOffset: 3 },
      { messageIndex: 2, partIndex: 1, startOffset: 0, endOffset: 25, textFormat: "pretty-json" as const },
      { messageIndex: 0 },
    ];
    for (const anchor of valid) {
      const created = await client.annotations.create(projectSlug, annotation(traceId, { anchor }));
      expect(created.metadata).toEqual({ rawFeedback: "The arithmetic is wrong", ...anchor });
    }
  });

  test("listAnnotations pages newest first, drafts included, without repeats", async () => {
    const { traceId } = await conversationTrace();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await client.annotations.create(projectSlug, annotation(traceId, { feedback: `note ${i}` }))).id);
    const draft = await system.createSystemDraft({ organizationId: project.organizationId, projectId: project.id, traceId, value: 0, passed: false, feedback: "flagged" });
    ids.push(draft.id);
    await client.scores.create(projectSlug, { body: { value: 1, passed: true, feedback: "", trace: { by: "id", id: traceId }, sourceId: "not-an-annotation" } });

    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    for (;;) {
      const page = await client.traces.listAnnotations(projectSlug, traceId, { limit: 2, cursor });
      pages++;
      seen.push(...page.items.map((item) => item.id));
      expect(page.items.length).toBeLessThanOrEqual(2);
      // Annotations written during the walk sort before its cursor: never repeated, never skipped.
      if (pages === 1) await client.annotations.create(projectSlug, annotation(traceId, { feedback: "written mid-walk" }));
      expect(page.hasMore).toBe(page.nextCursor !== null);
      if (!page.nextCursor) break;
      cursor = page.nextCursor;
    }
    expect(pages).toBe(3);
    expect(seen).toEqual([...ids].reverse());
    const [midWalk, newestBefore] = (await client.traces.listAnnotations(projectSlug, traceId)).items;
    expect(midWalk).toMatchObject({ feedback: "written mid-walk" });
    expect(newestBefore).toMatchObject({ id: draft.id, sourceId: "SYSTEM", draftedAt: expect.any(String) });
    expect(await client.traces.getAnnotation(projectSlug, traceId, ids[0]!)).toMatchObject({ id: ids[0], traceId });
    expect((await sdkFailure(client.traces.getAnnotation(projectSlug, newTraceId(), ids[0]!))).statusCode).toBe(404);

    const bad = await request("GET", `/v1/projects/${projectSlug}/traces/${traceId}/annotations?cursor=nonsense`);
    expect(bad.status).toBe(400);
    const tooMany = await request("GET", `/v1/projects/${projectSlug}/traces/${traceId}/annotations?limit=201`);
    expect(tooMany.status).toBe(400);
  });

  test("a system draft counts nowhere until it is published", async () => {
    const { traceId } = await conversationTrace();
    const { copier } = scoreStorage(vigil.ctx);
    const counts = async () => {
      await copier.drain();
      const detail = await client.traces.get(projectSlug, traceId);
      const listed = await client.traces.list(projectSlug, { filters: { traceId: [{ op: "eq", value: traceId }] } });
      expect(listed.items.map((item) => [item.positiveAnnotationCount, item.negativeAnnotationCount])).toEqual([
        [detail.positiveAnnotationCount, detail.negativeAnnotationCount],
      ]);
      return { positive: detail.positiveAnnotationCount, negative: detail.negativeAnnotationCount };
    };
    const draft = await system.createSystemDraft({ organizationId: project.organizationId, projectId: project.id, traceId, value: 0, passed: false, feedback: "Tool call failed" });
    expect(draft).toMatchObject({ sourceId: "SYSTEM", annotatorId: null, draftedAt: expect.any(String), metadata: { rawFeedback: "Tool call failed" } });
    const events = () => vigil.ctx.sql`SELECT 1 FROM failed_score_events WHERE score_id = ${draft.id}`;
    expect(await events()).toHaveLength(0);
    expect(await counts()).toEqual({ positive: 0, negative: 0 });

    const publishing = await request("POST", `/v1/projects/${projectSlug}/annotations/${draft.id}/publish`);
    expect(publishing.status).toBe(200);
    const published = await json(publishing);
    expect(published).toMatchObject({ id: draft.id, draftedAt: null });
    expect(await events()).toHaveLength(1);
    await client.annotations.create(projectSlug, annotation(traceId, { value: 1, passed: true, feedback: "Recovered well" }));
    expect(await counts()).toEqual({ positive: 1, negative: 1 });

    const again = await request("POST", `/v1/organizations/${project.organizationId}/projects/${project.id}/annotations/${draft.id}/publish`);
    expect(await json(again)).toMatchObject({ id: draft.id, draftedAt: null, updatedAt: published.updatedAt });
    await client.annotations.delete(projectSlug, draft.id);
    expect(await counts()).toEqual({ positive: 1, negative: 0 });
    const copy = await vigil.ctx.ch.client.query({
      query: `SELECT drafted_at, version FROM ${vigil.ctx.ch.database}.scores FINAL WHERE id = {id:String}`,
      query_params: { id: draft.id },
      format: "JSONEachRow",
    });
    expect(await copy.json()).toEqual([]);
    const [stored] = await vigil.ctx.sql<{ version: string; drafted_at: Date | null; deleted_at: Date | null }[]>`SELECT version, drafted_at, deleted_at FROM scores WHERE id = ${draft.id}`;
    expect(stored).toMatchObject({ version: "3", drafted_at: null, deleted_at: expect.any(Date) });
  });

  test("failed scores per signal and hour, from the ClickHouse copy", async () => {
    const { traceId } = await conversationTrace();
    const [signalA, signalB, signalC] = [newId(), newId(), newId()];
    const create = (signalId: string, extra: Record<string, unknown> = {}) => client.annotations.create(projectSlug, annotation(traceId, { signalId, ...extra }));
    await create(signalA);
    await create(signalA);
    await create(signalA, { passed: true, value: 1 });
    await create(signalB);
    const deleted = await create(signalB);
    await client.annotations.delete(projectSlug, deleted.id);
    await system.createSystemDraft({ organizationId: project.organizationId, projectId: project.id, traceId, value: 0, passed: false, feedback: "draft", signalId: signalC });
    await scoreStorage(vigil.ctx).copier.drain();
    const now = new Date();
    const hour = new Date(Math.floor(now.getTime() / 3_600_000) * 3_600_000).toISOString();
    const scope = { organizationId: project.organizationId, projectId: project.id, from: new Date(now.getTime() - 3_600_000), to: new Date(now.getTime() + 60_000) };
    expect(await countSignalScoresPerHour(vigil.ctx.ch, { ...scope, signalIds: [signalA, signalB, signalC] })).toEqual(
      [
        { signalId: signalA, hour, count: 2 },
        { signalId: signalB, hour, count: 1 },
      ].sort((a, b) => a.signalId.localeCompare(b.signalId)),
    );
    expect(await countSignalScoresPerHour(vigil.ctx.ch, { ...scope, signalIds: [signalA], to: new Date(now.getTime() - 3_000_000) })).toEqual([]);
  });

  test("a failed annotation's discovery event follows its eligibility: retracted on PATCH to passed and on delete, recorded again", async () => {
    const { traceId } = await conversationTrace();
    const events = (scoreId: string) =>
      vigil.ctx.sql<{ id: string; consumed: boolean; retracted: boolean }[]>`
        SELECT id, consumed_at IS NOT NULL AS consumed, retracted_at IS NOT NULL AS retracted
        FROM failed_score_events WHERE score_id = ${scoreId} ORDER BY id`.then((rows) => rows.map(({ consumed, retracted }) => ({ consumed, retracted })));
    // What signal discovery does when it has taken an event.
    const consume = (scoreId: string) => vigil.ctx.sql`UPDATE failed_score_events SET consumed_at = now() WHERE score_id = ${scoreId} AND consumed_at IS NULL`;
    const patch = (id: string, body: Record<string, unknown>) => client.annotations.update(projectSlug, id, body);
    const pending = { consumed: false, retracted: false };

    const created = await client.annotations.create(projectSlug, annotation(traceId));
    expect(await events(created.id)).toEqual([pending]);
    await patch(created.id, { passed: true });
    expect(await events(created.id)).toEqual([]);
    await patch(created.id, { passed: false });
    expect(await events(created.id)).toEqual([pending]);

    await consume(created.id);
    await patch(created.id, { feedback: "Still wrong, differently" });
    expect(await events(created.id)).toEqual([{ consumed: true, retracted: false }]);
    await patch(created.id, { passed: true });
    expect(await events(created.id)).toEqual([{ consumed: true, retracted: true }]);
    await patch(created.id, { value: 0.2 });
    expect(await events(created.id)).toEqual([{ consumed: true, retracted: true }]);
    await patch(created.id, { passed: false });
    expect(await events(created.id)).toEqual([{ consumed: true, retracted: true }, pending]);

    await client.annotations.delete(projectSlug, created.id);
    expect(await events(created.id)).toEqual([{ consumed: true, retracted: true }]);

    const consumedThenDeleted = await client.annotations.create(projectSlug, annotation(traceId));
    await consume(consumedThenDeleted.id);
    await client.annotations.delete(projectSlug, consumedThenDeleted.id);
    expect(await events(consumedThenDeleted.id)).toEqual([{ consumed: true, retracted: true }]);
  });

  test("publish, PATCH and DELETE of an unknown or another organization's annotation are 404s, in both path forms", async () => {
    const { traceId } = await conversationTrace();
    const own = await client.annotations.create(projectSlug, annotation(traceId));
    const other = await bootstrapAccount(vigil.url);
    const otherProject = await other.client.projects.get(other.account.projectSlug);
    const otherTrace = await insertScoredTrace(vigil.ctx, { organizationId: otherProject.organizationId, projectId: otherProject.id });
    const foreign = await other.client.annotations.create(other.account.projectSlug, annotation(otherTrace.traceId));

    const ownBases = [`/v1/projects/${projectSlug}`, `/v1/organizations/${project.organizationId}/projects/${project.id}`];
    const attempts: [string, string][] = [
      ...ownBases.flatMap((base) => [`${base}/annotations/${newId()}`, `${base}/annotations/${foreign.id}`]).map((path) => ["own project", path] as [string, string]),
      ["foreign organization path", `/v1/organizations/${otherProject.organizationId}/projects/${project.id}/annotations/${own.id}`],
      ["foreign organization path", `/v1/organizations/${otherProject.organizationId}/projects/${otherProject.id}/annotations/${foreign.id}`],
    ];
    for (const [label, path] of attempts) {
      for (const [method, suffix, body] of [["POST", "/publish", undefined], ["PATCH", "", { passed: true }], ["DELETE", "", undefined]] as const) {
        const res = await request(method, path + suffix, body);
        expect({ label, method, path, status: res.status }).toEqual({ label, method, path, status: 404 });
      }
    }
    expect(await client.annotations.get(projectSlug, own.id)).toEqual(own);
    expect(await other.client.annotations.get(other.account.projectSlug, foreign.id)).toEqual(foreign);
  });

  test("listing the annotations of an unknown trace is a 404, in both path forms", async () => {
    const unknown = newTraceId();
    expect((await sdkFailure(client.traces.listAnnotations(projectSlug, unknown))).statusCode).toBe(404);
    const res = await request("GET", `/v1/organizations/${project.organizationId}/projects/${project.id}/traces/${unknown}/annotations`);
    expect(res.status).toBe(404);
    expect(await json(res)).toEqual({ error: "Trace not found" });
    const { traceId } = await conversationTrace();
    expect(await client.traces.listAnnotations(projectSlug, traceId)).toEqual({ items: [], nextCursor: null, hasMore: false });
  });

  test("an unknown trace is a 404; another organization's id in the path is a 404", async () => {
    expect((await sdkFailure(client.annotations.create(projectSlug, annotation(newTraceId())))).statusCode).toBe(404);
    const { traceId } = await conversationTrace();
    const created = await client.annotations.create(projectSlug, annotation(traceId));
    const other = await bootstrapAccount(vigil.url);
    const otherProject = await other.client.projects.get(other.account.projectSlug);
    const foreign = `/v1/organizations/${otherProject.organizationId}/projects/${project.id}`;
    expect((await request("POST", `${foreign}/annotations`, annotation(traceId))).status).toBe(404);
    expect((await request("GET", `${foreign}/annotations/${created.id}`)).status).toBe(404);
    expect((await request("GET", `${foreign}/traces/${traceId}/annotations`)).status).toBe(404);
    expect((await sdkFailure(other.client.annotations.get(other.account.projectSlug, created.id))).statusCode).toBe(404);
    expect((await sdkFailure(other.client.annotations.delete(other.account.projectSlug, created.id))).statusCode).toBe(404);
    expect(await client.annotations.get(projectSlug, created.id)).toMatchObject({ id: created.id });
  });
});
