import { beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { Vigil } from "../src/server";
import { signalsRuntime } from "../src/modules/signals/runtime";
import { SignalDiscovery } from "../src/modules/signals/discovery";
import { bootstrapAccount, sharedVigil, startTestVigil } from "./helpers";
import { insertScoredTrace } from "./fixtures/scored-traces";
import { sdkFailure } from "./sdk";

setDefaultTimeout(60_000);
// Hooks that start a Vigil get longer: on a loaded machine the embedded PostgreSQL alone can take a minute.

let vigil: Vigil;

beforeAll(async () => {
  vigil = await sharedVigil();
}, 180_000);

async function account() {
  const { client, account } = await bootstrapAccount(vigil.url);
  const project = await client.projects.get(account.projectSlug);
  return { client, slug: account.projectSlug, project, account };
}

type Account = Awaited<ReturnType<typeof account>>;

const trace = (a: Account, extra: { sessionId?: string; userId?: string; tags?: string[] } = {}) =>
  insertScoredTrace(vigil.ctx, { organizationId: a.project.organizationId, projectId: a.project.id, ...extra }).then((t) => t.traceId);

const annotate = (a: Account, traceId: string, feedback: string, extra: Record<string, unknown> = {}) =>
  a.client.annotations.create(a.slug, { value: 0, passed: false, feedback, trace: { by: "id", id: traceId }, ...extra } as never);

const customScore = (a: Account, traceId: string, feedback: string, passed = false) =>
  a.client.scores.create(a.slug, { body: { sourceId: "nightly-check", value: passed ? 1 : 0, passed, feedback, trace: { by: "id", id: traceId } } } as never);

const drain = (v: Vigil = vigil) => signalsRuntime(v.ctx).discovery.drain();

/** Feedback as reviewers write it: three kinds of failure, each said several ways. */
const feedbackKinds = {
  language: [
    "The agent answered in English even though the user wrote in Spanish",
    "answered in english, user wrote spanish",
    "User asked in Spanish but got the answer in English again",
    "replied in English to a Spanish-speaking user",
    "Wrong language: user wrote Spanish, the answer came back in English",
  ],
  refund: [
    "Promised a refund without checking the refund policy",
    "agent promised the customer a refund, policy says no refunds after 30 days",
    "Refund promised although the policy doesn't allow refunds",
    "it promised a refund it can't give per policy",
  ],
  sql: [
    "The generated SQL query has a syntax error",
    "sql query syntax error, missing comma",
    "Syntax error in the SQL query it generated",
    "generated an SQL query that fails with a syntax error",
  ],
};

describe("discovery", () => {
  test("paraphrased annotations form one visible signal per kind of failure", async () => {
    const a = await account();
    const all = Object.entries(feedbackKinds).flatMap(([kind, texts]) => texts.map((text) => ({ kind, text })));
    // Interleaved, as reviews arrive.
    all.sort((x, y) => x.text.length - y.text.length);
    const byKind = new Map<string, string[]>();
    for (const { kind, text } of all) {
      const annotation = await annotate(a, await trace(a, { sessionId: `s-${kind}`, tags: [kind] }), text);
      byKind.set(kind, [...(byKind.get(kind) ?? []), annotation.id]);
    }
    await drain();
    const page = await a.client.signals.list(a.slug);
    expect(page.items).toHaveLength(3);
    expect(page.items.map((signal) => signal.occurrences).sort()).toEqual([4, 4, 5]);
    for (const signal of page.items) {
      expect(signal.source).toBe("annotation");
      expect(signal.states).toEqual(["new"]);
      expect(signal.trend).toHaveLength(14);
      expect(signal.trend.at(-1)!.count).toBe(signal.occurrences);
      expect(signal.tags).toHaveLength(1);
      expect(signal.affectedSessionsPercent).toBeCloseTo(1 / 3, 5);
    }
    // Every annotation of a kind is linked to the same signal, and no two kinds share one.
    const signalOf = new Map<string, string>();
    for (const [kind, ids] of byKind) {
      const linked = new Set(await Promise.all(ids.map(async (id) => (await a.client.annotations.get(a.slug, id)).signalId)));
      expect(linked.size).toBe(1);
      signalOf.set(kind, [...linked][0]!);
    }
    expect(new Set(signalOf.values()).size).toBe(3);
  });

  test("a signal of custom scores is visible at its third member; a retracted score leaves it", async () => {
    const a = await account();
    const feedback = ["Checkout total does not include the shipping fee", "the checkout total is missing the shipping fee", "Shipping fee missing from the checkout total"];
    const traces = await Promise.all(feedback.map(() => trace(a)));
    await customScore(a, traces[0]!, feedback[0]!);
    await customScore(a, traces[1]!, feedback[1]!);
    await drain();
    expect((await a.client.signals.list(a.slug)).items).toHaveLength(0);
    const third = await customScore(a, traces[2]!, feedback[2]!);
    await drain();
    const [signal] = (await a.client.signals.list(a.slug)).items;
    expect(signal!.occurrences).toBe(3);
    // The score stops failing: discovery takes it out again.
    const store = (await import("../src/modules/scores/storage")).scoreStorage(vigil.ctx).store;
    await store.update(a.project.id, third.id, "custom", { passed: true });
    // This drain or the scheduled one running beside it (which may hold the event) takes the retraction out.
    await drain();
    const untaken = async () =>
      (await vigil.ctx.sql`SELECT 1 FROM failed_score_events WHERE score_id = ${third.id} AND retracted_at IS NOT NULL AND unlinked_at IS NULL`).length;
    for (let waited = 0; waited < 10_000 && (await untaken()) > 0; waited += 100) await Bun.sleep(100);
    const [member] = await vigil.ctx.sql<{ count: number }[]>`SELECT count(*)::int AS count FROM signal_members WHERE signal_id = ${signal!.id}`;
    expect(member!.count).toBe(2);
    const detail = await a.client.signals.get(a.slug, signal!.slug);
    expect(detail.occurrences).toBe(2);
    const [row] = await vigil.ctx.sql<{ member_count: number; signal_id: string | null }[]>`
      SELECT g.member_count, s.signal_id FROM signals g, scores s WHERE g.id = ${signal!.id} AND s.id = ${third.id}`;
    expect(row).toEqual({ member_count: 2, signal_id: null });
  });

  test("an annotation with a signalId joins that signal whatever its feedback", async () => {
    const a = await account();
    await annotate(a, await trace(a), "The SQL query it generated has a syntax error");
    await drain();
    const [signal] = (await a.client.signals.list(a.slug)).items;
    await annotate(a, await trace(a), "Completely unrelated words about weather forecasts", { signalId: signal!.id });
    await drain();
    const page = await a.client.signals.list(a.slug);
    expect(page.items).toHaveLength(1);
    expect(page.items[0]!.occurrences).toBe(2);
  });

  test("two Vigil processes draining at once link each score exactly once", async () => {
    const first = await startTestVigil();
    const url = first.ctx.config.databaseUrl!;
    const second = await startTestVigil({ DATABASE_URL: url, CLICKHOUSE_DATABASE: first.ctx.config.clickhouse.database });
    try {
      const { client, account: acc } = await bootstrapAccount(first.url);
      const project = await client.projects.get(acc.projectSlug);
      const a = { client, slug: acc.projectSlug, project, account: acc };
      const traceIds = await Promise.all(
        Array.from({ length: 20 }, () => insertScoredTrace(first.ctx, { organizationId: project.organizationId, projectId: project.id }).then((t) => t.traceId)),
      );
      const texts = Object.values(feedbackKinds).flat();
      await Promise.all(traceIds.flatMap((id, i) => [annotate(a, id, texts[i % texts.length]!), annotate(a, id, texts[(i + 5) % texts.length]!)]));
      // Small batches, so the two drains interleave claims instead of one taking everything at once.
      const consumer = (v: Vigil) => new SignalDiscovery(v.ctx.sql, signalsRuntime(v.ctx).embedder, null, v.ctx.log, 4);
      const [firstConsumer, secondConsumer] = [consumer(first), consumer(second)];
      const [one, two] = await Promise.all([firstConsumer.drain(), secondConsumer.drain()]);
      expect(one).toBeGreaterThan(0);
      expect(two).toBeGreaterThan(0);
      // The scheduled discovery job of either process may still hold a batch: wait until none is pending.
      while ((await first.ctx.sql`SELECT 1 FROM failed_score_events WHERE consumed_at IS NULL LIMIT 1`).length) await Bun.sleep(100);
      const [counts] = await first.ctx.sql<{ members: number; distinct_scores: number; member_total: number; pending: number }[]>`
        SELECT (SELECT count(*)::int FROM signal_members) AS members,
          (SELECT count(DISTINCT score_id)::int FROM signal_members) AS distinct_scores,
          (SELECT sum(member_count)::int FROM signals) AS member_total,
          (SELECT count(*)::int FROM failed_score_events WHERE consumed_at IS NULL) AS pending`;
      expect(counts).toEqual({ members: 40, distinct_scores: 40, member_total: 40, pending: 0 });
      // Each process keeps the signals it saw in memory: after the other one changed them (a retraction
      // here, then new members there), every stored centroid is still exactly the sum of its members.
      const store = (await import("../src/modules/scores/storage")).scoreStorage(first.ctx).store;
      const [retracted] = await first.ctx.sql<{ score_id: string }[]>`SELECT score_id FROM signal_members LIMIT 1`;
      await store.update(project.id, retracted!.score_id, "annotation", { passed: true, value: 1 });
      await firstConsumer.drain();
      while ((await first.ctx.sql`SELECT 1 FROM failed_score_events WHERE retracted_at IS NOT NULL AND unlinked_at IS NULL LIMIT 1`).length) await Bun.sleep(100);
      await Promise.all(traceIds.slice(0, 6).map((id, i) => annotate(a, id, texts[(i + 2) % texts.length]!)));
      await secondConsumer.drain();
      while ((await first.ctx.sql`SELECT 1 FROM failed_score_events WHERE consumed_at IS NULL LIMIT 1`).length) await Bun.sleep(100);
      const vector = (bytes: Buffer) => new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
      const signals = await first.ctx.sql<{ id: string; centroid: Buffer; member_count: number }[]>`SELECT id, centroid, member_count FROM signals WHERE project_id = ${project.id}`;
      const members = await first.ctx.sql<{ signal_id: string; weight: number; embedding: Buffer }[]>`SELECT signal_id, weight, embedding FROM signal_members`;
      expect(signals.reduce((sum, signal) => sum + signal.member_count, 0)).toBe(45);
      for (const signal of signals) {
        const expected = new Float32Array(vector(signal.centroid).length);
        for (const member of members.filter((m) => m.signal_id === signal.id)) vector(member.embedding).forEach((x, i) => (expected[i]! += member.weight * x));
        const stored = vector(signal.centroid);
        // Decay over the test's seconds is below 1e-5; float32 sums round at about 1e-6.
        expect(Math.max(...stored.map((x, i) => Math.abs(x - expected[i]!)))).toBeLessThan(1e-3);
      }
    } finally {
      await second.stop();
      await first.stop();
    }
  });
});

describe("signal routes through the official client", () => {
  let a: Account;
  let slug: string;
  let id: string;
  let sessionTrace: string;

  beforeAll(async () => {
    a = await account();
    sessionTrace = await trace(a, { sessionId: "chat-7", userId: "user-9", tags: ["checkout"] });
    await annotate(a, sessionTrace, "The agent leaked the internal discount code to the customer");
    await annotate(a, await trace(a, { sessionId: "chat-8" }), "leaked the internal discount code again");
    await drain();
    const [signal] = (await a.client.signals.list(a.slug)).items;
    slug = signal!.slug;
    id = signal!.id;
  }, 180_000);

  test("list: query, lifecycle group, sorts, cursor", async () => {
    await annotate(a, await trace(a), "Tool call to the weather API timed out");
    await annotate(a, await trace(a), "Tool call to the weather API timed out twice");
    await annotate(a, await trace(a), "weather API tool call timed out");
    await drain();
    const all = await a.client.signals.list(a.slug, { sortBy: "occurrences", sortDirection: "desc" });
    expect(all.items.map((signal) => signal.occurrences)).toEqual([3, 2]);
    const found = await a.client.signals.list(a.slug, { query: "discount code" });
    expect(found.items.map((signal) => signal.id)).toEqual([id]);
    const first = await a.client.signals.list(a.slug, { limit: 1, sortBy: "lastSeen" });
    expect(first.hasMore).toBe(true);
    const second = await a.client.signals.list(a.slug, { limit: 1, sortBy: "lastSeen", cursor: first.nextCursor! });
    expect(second.hasMore).toBe(false);
    expect(new Set([first.items[0]!.id, second.items[0]!.id]).size).toBe(2);
    const old = await a.client.signals.list(a.slug, { fromIso: "2020-01-01T00:00:00Z", toIso: "2020-02-01T00:00:00Z" });
    expect(old.items).toHaveLength(0);
    expect((await sdkFailure(a.client.signals.list(a.slug, { limit: 500 }))).statusCode).toBe(400);
  });

  test("get, update, trend, traces, analytics", async () => {
    const detail = await a.client.signals.get(a.slug, slug);
    expect(detail).toMatchObject({ id, slug, occurrences: 2, source: "annotation", evaluations: [], feedback: null, monitoringState: { kind: "idle" } });
    expect(detail.tags).toEqual(["checkout"]);
    expect(await a.client.signals.update(a.slug, slug, { name: "Discount code leaked" })).toEqual({ id, slug, changed: true });
    expect(await a.client.signals.update(a.slug, slug, { name: "Discount code leaked" })).toEqual({ id, slug, changed: false });
    expect((await a.client.signals.get(a.slug, slug)).name).toBe("Discount code leaked");
    const trend = await a.client.signals.trend(a.slug, slug);
    expect(trend.buckets.length).toBeGreaterThanOrEqual(28);
    expect(trend.buckets.reduce((sum, bucket) => sum + bucket.count, 0)).toBe(2);
    const traces = await a.client.signals.listTraces(a.slug, slug, { limit: 1 });
    expect(traces.items).toHaveLength(1);
    const rest = await a.client.signals.listTraces(a.slug, slug, { limit: 1, cursor: traces.nextCursor! });
    expect(rest.items).toHaveLength(1);
    expect(rest.items[0]!.traceId).not.toBe(traces.items[0]!.traceId);
    const analytics = await a.client.signals.analytics(a.slug);
    expect(analytics.new.total).toBe(2);
    expect(analytics.occurrences.total).toBe(5);
    expect((await sdkFailure(a.client.signals.get(a.slug, "no-such-signal"))).statusCode).toBe(404);
  });

  test("lifecycle: resolve, regress on recurrence, ignore mutes, unignore, mute, unmute", async () => {
    const resolved = await a.client.signals.resolve(a.slug, { signalIds: [id] });
    expect(resolved.items[0]).toMatchObject({ signalId: id, changed: true, resolvedAt: expect.any(String) });
    expect((await a.client.signals.resolve(a.slug, { signalIds: [id] })).items[0]!.changed).toBe(false);
    expect((await a.client.signals.get(a.slug, slug)).states).toEqual(["resolved"]);
    expect((await a.client.signals.list(a.slug, { lifecycleGroup: "archived" })).items.map((s) => s.id)).toEqual([id]);
    await annotate(a, await trace(a), "It leaked the internal discount code to a customer", { signalId: id });
    await drain();
    const regressed = await a.client.signals.get(a.slug, slug);
    expect(regressed.states).toEqual(["regressed", "new"]);
    expect(regressed.resolvedAt).toBeNull();
    expect(regressed.regressedAt).not.toBeNull();
    const ignored = await a.client.signals.ignore(a.slug, { body: { signalIds: [id] } });
    expect(ignored.items[0]!.ignoredAt).not.toBeNull();
    expect(ignored.items[0]!.mutedAt).not.toBeNull();
    expect((await a.client.signals.unignore(a.slug, { body: { signalIds: [id] } })).items[0]!.ignoredAt).toBeNull();
    expect((await a.client.signals.unmute(a.slug, { body: { signalIds: [id] } })).items[0]!.mutedAt).toBeNull();
    expect((await a.client.signals.mute(a.slug, { body: { signalIds: [id] } })).items[0]!.mutedAt).not.toBeNull();
    expect((await a.client.signals.unresolve(a.slug, { body: { signalIds: [id] } })).items[0]!.changed).toBe(false);
    expect((await sdkFailure(a.client.signals.mute(a.slug, { body: { signalIds: ["nope"] } }))).statusCode).toBe(404);
  });

  test("feedback, monitor, unmonitor, export, sessions and users", async () => {
    expect((await sdkFailure(a.client.signals.submitFeedback(a.slug, slug, { passed: false }))).statusCode).toBe(400);
    expect(await a.client.signals.submitFeedback(a.slug, slug, { passed: true })).toEqual({ value: 1, passed: true, feedback: "", ignored: false });
    expect((await a.client.signals.get(a.slug, slug)).feedback).toEqual({ value: 1, passed: true, feedback: "" });
    const monitored = await a.client.signals.monitor(a.slug, slug);
    expect(monitored.evaluationId).toBeNull();
    const [evaluation] = (await a.client.signals.get(a.slug, slug)).evaluations;
    expect(evaluation).toMatchObject({ sampling: 100, archivedAt: null, alignment: null });
    await a.client.signals.unmonitor(a.slug, slug);
    expect((await a.client.signals.get(a.slug, slug)).evaluations).toEqual([]);
    const sessions = await a.client.sessions.listSignals(a.slug, "chat-7");
    expect(sessions.items).toHaveLength(1);
    expect(sessions.items[0]).toMatchObject({ id, occurrences: 1, traceIds: [sessionTrace] });
    expect((await a.client.sessions.getSignal(a.slug, "chat-7", slug)).id).toBe(id);
    expect((await sdkFailure(a.client.sessions.getSignal(a.slug, "chat-unknown", slug))).statusCode).toBe(404);
    const users = await a.client.users.signals(a.slug, "user-9");
    expect(users.items).toMatchObject([{ signalId: id, occurrences: 1, affectedTraces: 1 }]);
    expect((await sdkFailure(a.client.signals.export(a.slug, { recipient: "stranger@example.com" }))).statusCode).toBe(400);
    const userId = `u${Math.random().toString(36).slice(2, 12)}`;
    const email = `${userId}@example.com`;
    await vigil.ctx.sql`INSERT INTO users (id, email) VALUES (${userId}, ${email})`;
    await vigil.ctx.sql`INSERT INTO memberships (organization_id, user_id, role) VALUES (${a.project.organizationId}, ${userId}, 'member')`;
    expect(await a.client.signals.export(a.slug, { recipient: email.toUpperCase() })).toEqual({ status: "queued" });
    const outbox = join(vigil.ctx.config.dataDir, "outbox");
    // The body is quoted-printable: undo its soft line breaks before reading the CSV.
    const bodyOf = (mail: string) => mail.replaceAll("=\r\n", "").split("\r\n\r\n").slice(1).join("\r\n\r\n");
    let csv = "";
    for (let i = 0; i < 150 && !csv.includes(`${id},${slug},`); i++) {
      await Bun.sleep(200);
      const files = existsSync(outbox) ? readdirSync(outbox) : [];
      csv = bodyOf(files.map((file) => readFileSync(join(outbox, file), "utf8")).find((text) => text.includes(email)) ?? "");
    }
    expect(csv.split("\r\n")[0]).toBe("id,slug,name,description,source,states,occurrences,firstSeenAt,lastSeenAt,resolvedAt,ignoredAt,mutedAt");
    expect(csv).toContain(`${id},${slug},`);
  });

  test("delete", async () => {
    await a.client.signals.delete(a.slug, slug);
    expect((await sdkFailure(a.client.signals.get(a.slug, slug))).statusCode).toBe(404);
  });
});
