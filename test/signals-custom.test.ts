import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import type { LatitudeClient } from "@latitude-data/sdk";
import type { Vigil } from "../src/server";
import { flaggerSlugs } from "../src/modules/projects/model";
import { alignmentMetrics, refreshAlignment } from "../src/modules/signals/alignment";
import { TraceDetectors } from "../src/modules/signals/detectors";
import { signalsRuntime } from "../src/modules/signals/runtime";
import { bootstrapAccount, startTestVigil } from "./helpers";
import { insertScoredTrace, refuseScoresOf } from "./fixtures/scored-traces";
import { insertSpans, newSpanId, spanRow } from "./fixtures/spans";
import { startFakeProvider, type FakeProvider } from "./fixtures/fake-provider";
import { sdkFailure } from "./sdk";

setDefaultTimeout(60_000);
// Hooks that start a Vigil get longer: on a loaded machine the embedded PostgreSQL alone can take a minute.

const text = (role: string, content: string) => ({ role, parts: [{ type: "text", content }] });

let vigil: Vigil;
let provider: FakeProvider;
let client: LatitudeClient;
let slug: string;
let tenant: { organizationId: string; projectId: string };
let detectors: TraceDetectors;

beforeAll(async () => {
  provider = startFakeProvider((prompt) =>
    prompt.includes("You name a recurring failure")
      ? { name: "Orders not found", description: "The agent cannot find the customer's orders." }
      : { failed: prompt.includes("could not find order"), reason: "quoted: could not find order" },
  );
  vigil = await startTestVigil({ OPENAI_BASE_URL: provider.url });
  const created = await bootstrapAccount(vigil.url);
  client = created.client;
  slug = created.account.projectSlug;
  const project = await client.projects.get(slug);
  tenant = { organizationId: project.organizationId, projectId: project.id };
  // Flaggers stay out of the way: these tests count evaluation scores.
  const off = Object.fromEntries(flaggerSlugs.map((flagger) => [flagger, false]));
  await client.projects.update(slug, { flaggers: off } as never);
  detectors = new TraceDetectors(vigil.ctx);
}, 180_000);

afterAll(async () => {
  await vigil.stop();
  provider.stop();
});

/** Three conversations: A fails a tool and apologises, B answers in JSON, C answers nothing. */
async function traces() {
  const a = await insertScoredTrace(vigil.ctx, {
    ...tenant,
    sessionId: "s1",
    input: [
      text("user", "Where is my order 123?"),
      { role: "assistant", parts: [{ type: "tool_call", id: "c1", name: "get_order", arguments: { id: 123 } }] },
      { role: "tool", parts: [{ type: "tool_call_response", id: "c1", response: { status: "failed" } }] },
    ],
    output: [text("assistant", "Sorry, I could not find order 123, please contact support.")],
  });
  await insertSpans(vigil.ctx, [
    spanRow(tenant, { trace_id: a.traceId, span_id: newSpanId(), parent_span_id: a.rootSpanId, operation: "chat", startMs: Date.now() - 59_000, finish_reasons: ["length"], status_code: "error", tokens_input: 5000 }),
  ]);
  const b = await insertScoredTrace(vigil.ctx, { ...tenant, sessionId: "s1", input: [text("user", "Give me the order as JSON")], output: [text("assistant", '{"order": 123, "status": "shipped"}')] });
  const c = await insertScoredTrace(vigil.ctx, { ...tenant, sessionId: "s2", input: [text("user", "hi")], output: [text("assistant", "")] });
  return { A: a.traceId, B: b.traceId, C: c.traceId };
}

const rule = (conditions: unknown[], match?: "all" | "any") => ({ settings: { kind: "rule", conditions, ...(match ? { match } : {}) } });

/** Condition → which of A, B, C it flags. */
const cases: [string, unknown, string][] = [
  ["contains, last assistant", rule([{ type: "text_match", scope: "last_assistant", operator: "contains", value: "Contact Support" }]), "A"],
  ["not contains, any user", rule([{ type: "text_match", scope: "any_user", operator: "not_contains", value: "order" }]), "C"],
  ["regex, any user", rule([{ type: "text_match", scope: "any_user", operator: "matches_regex", value: "ORDER \\d+" }]), "A"],
  ["not regex, last assistant", rule([{ type: "text_match", scope: "last_assistant", operator: "not_matches_regex", value: "^\\{" }]), "AC"],
  ["case-sensitive, any tool", rule([{ type: "text_match", scope: "any_tool", operator: "contains", value: "failed", caseSensitive: true }]), "A"],
  ["case-sensitive miss, any tool", rule([{ type: "text_match", scope: "any_tool", operator: "contains", value: "FAILED", caseSensitive: true }]), ""],
  ["any assistant", rule([{ type: "text_match", scope: "any_assistant", operator: "contains", value: "shipped" }]), "B"],
  ["conversation", rule([{ type: "text_match", operator: "contains", value: "json" }]), "B"],
  ["empty output", rule([{ type: "empty_output" }]), "C"],
  ["output length in words", rule([{ type: "output_length", unit: "words", operator: "gte", value: 5 }]), "A"],
  ["output length in chars", rule([{ type: "output_length", operator: "gt", value: 20 }]), "AB"],
  ["valid JSON", rule([{ type: "json_output", expectation: "valid" }]), "B"],
  ["invalid JSON", rule([{ type: "json_output", expectation: "invalid" }]), "AC"],
  ["metric errorCount", rule([{ type: "metric", field: "errorCount", operator: "gt", value: 0 }]), "A"],
  ["metric tokensInput", rule([{ type: "metric", field: "tokensInput", operator: "gte", value: 5000 }]), "A"],
  ["metric traceCount over the session", rule([{ type: "metric", field: "traceCount", aggregation: "session", operator: "gte", value: 2 }]), "AB"],
  ["metric errorCount of all session traces", rule([{ type: "metric", field: "errorCount", aggregation: "allTraces", operator: "gt", value: 0 }]), ""],
  ["metric errorCount of any session trace", rule([{ type: "metric", field: "errorCount", aggregation: "anyTrace", operator: "gt", value: 0 }]), "AB"],
  ["tool used", rule([{ type: "tool_used", toolName: "get_order" }]), "A"],
  ["tool failed", rule([{ type: "tool_failed" }]), "A"],
  ["named tool failed", rule([{ type: "tool_failed", toolName: "other_tool" }]), ""],
  ["tool call count", rule([{ type: "tool_call_count", operator: "gte", value: 1 }]), "A"],
  ["error", rule([{ type: "error" }]), "A"],
  ["finish reason", rule([{ type: "finish_reason", value: "length" }]), "A"],
  ["semantic similarity", rule([{ type: "semantic_similarity", query: "could not find the order, contact support", threshold: 0.8 }]), "A"],
  ["always", rule([{ type: "always" }]), "ABC"],
  ["match any", rule([{ type: "error" }, { type: "empty_output" }], "any"), "AC"],
  ["match all", rule([{ type: "error" }, { type: "empty_output" }]), ""],
  ["judge", { settings: { kind: "judge", criteria: "The agent fails to find the user's order" } }, "A"],
];

describe("custom signals", () => {
  test("script and malformed settings are refused with a clear 400", async () => {
    const script = await sdkFailure(client.signals.create(slug, { name: "Scripted", description: "x", evaluation: { script: "return true" } }));
    expect(script.statusCode).toBe(400);
    expect(script.body.error).toContain("scripts are not supported");
    expect(script.body.error).toContain("rule");
    const regex = await sdkFailure(client.signals.create(slug, { name: "Bad regex", description: "x", evaluation: rule([{ type: "text_match", operator: "matches_regex", value: "(" }]) as never }));
    expect(regex.body.error).toContain("conditions.0.value");
    const kind = await sdkFailure(client.signals.create(slug, { name: "Bad kind", description: "x", evaluation: { settings: { kind: "python" } } as never }));
    expect(kind.body.error).toContain("kind");
    const filters = await sdkFailure(client.signals.create(slug, { name: "Bad filters", description: "x", filters: { nope: [{ op: "eq", value: 1 }] } as never, evaluation: rule([{ type: "always" }]) as never }));
    expect(filters.statusCode).toBe(400);
  });

  test("each rule condition type and the judge flag the traces they describe, as evaluation scores linked to the signal", async () => {
    const created = new Map<string, { id: string; slug: string; evaluationId: string }>();
    for (const [name, evaluation] of cases) created.set(name, await client.signals.create(slug, { name, description: `flags ${name}`, evaluation: evaluation as never }));
    const filtered = await client.signals.create(slug, { name: "session s1 only", description: "x", filters: { sessionId: [{ op: "eq", value: "s1" }] }, evaluation: rule([{ type: "always" }]) as never });
    const ids = await traces();
    for (const traceId of Object.values(ids)) await detectors.runTrace(tenant.organizationId, tenant.projectId, traceId);
    const scores = await vigil.ctx.sql<{ source_id: string; trace_id: string; passed: boolean; signal_id: string | null; metadata: { evaluationHash: string } }[]>`
      SELECT source_id, trace_id, passed, signal_id, metadata FROM scores WHERE project_id = ${tenant.projectId} AND source = 'evaluation'`;
    const letter = new Map(Object.entries(ids).map(([key, id]) => [id, key]));
    for (const [name, , expected] of cases) {
      const signal = created.get(name)!;
      const own = scores.filter((score) => score.source_id === signal.evaluationId);
      expect({ name, verdicts: own.length }).toEqual({ name, verdicts: 3 });
      const flagged = own.filter((score) => !score.passed).map((score) => letter.get(score.trace_id)).sort().join("");
      expect({ name, flagged }).toEqual({ name, flagged: expected });
      for (const score of own) {
        expect(score.metadata.evaluationHash).toMatch(/^[0-9a-f]{16}$/);
        expect(score.signal_id).toBe(score.passed ? null : signal.id);
      }
    }
    const gated = scores.filter((score) => score.source_id === filtered.evaluationId).map((score) => letter.get(score.trace_id)).sort().join("");
    expect(gated).toBe("AB");
    // Running again (a trace quiet again after late spans) writes no second verdict.
    await detectors.runTrace(tenant.organizationId, tenant.projectId, ids.A);
    const [again] = await vigil.ctx.sql<{ count: number }[]>`SELECT count(*)::int AS count FROM scores WHERE project_id = ${tenant.projectId} AND source = 'evaluation'`;
    expect(again!.count).toBe(scores.length);
    await signalsRuntime(vigil.ctx).discovery.drain();
    const always = await client.signals.get(slug, created.get("always")!.slug);
    expect(always.occurrences).toBe(3);
    expect(always.source).toBe("custom");
    expect(always.evaluations.map((evaluation) => evaluation.id)).toEqual([created.get("always")!.evaluationId]);
    const judged = await client.signals.get(slug, created.get("judge")!.slug);
    expect(judged.occurrences).toBe(1);
    expect(provider.calls()).toBeGreaterThanOrEqual(3);
  });

  test("patterns run in linear time: RE2 syntax at creation, a catastrophic one does not stall the scan, one stored unrunnable is skipped alone", async () => {
    const lookbehind = await sdkFailure(client.signals.create(slug, { name: "Lookbehind", description: "x", evaluation: rule([{ type: "text_match", operator: "matches_regex", value: "(?<=order )\\d+" }]) as never }));
    expect(lookbehind.statusCode).toBe(400);
    expect(lookbehind.body.error).toContain("conditions.0.value");
    expect(lookbehind.body.error).toContain("RE2");
    // Nested quantifiers over a long run of a's that then fails to match: exponential for a backtracking engine.
    const nested = await client.signals.create(slug, { name: "Nested quantifiers", description: "x", evaluation: rule([{ type: "text_match", scope: "any_user", operator: "matches_regex", value: "^(a+)+$" }]) as never });
    const stored = await client.signals.create(slug, { name: "Stored before RE2", description: "x", evaluation: rule([{ type: "always" }]) as never });
    const other = await client.signals.create(slug, { name: "Runs beside it", description: "x", evaluation: rule([{ type: "always" }]) as never });
    // As an earlier version could store it: a pattern JavaScript compiles and RE2 does not (a lookahead).
    const unrunnable = { kind: "rule", conditions: [{ type: "text_match", operator: "matches_regex", value: "(?=a)a" }] };
    await vigil.ctx.sql`UPDATE evaluations SET settings = ${vigil.ctx.sql.json(unrunnable)} WHERE id = ${stored.evaluationId}`;
    const stalling = await insertScoredTrace(vigil.ctx, { ...tenant, input: [text("user", `${"a".repeat(5000)}!`)] });
    const matching = await insertScoredTrace(vigil.ctx, { ...tenant, input: [text("user", "aaaa")] });
    await detectors.runTraces(tenant.organizationId, tenant.projectId, [stalling.traceId, matching.traceId]);
    const verdicts = await vigil.ctx.sql<{ source_id: string; trace_id: string; passed: boolean }[]>`
      SELECT source_id, trace_id, passed FROM scores WHERE trace_id IN ${vigil.ctx.sql([stalling.traceId, matching.traceId])} AND source = 'evaluation'`;
    const passed = (evaluationId: string, traceId: string) => verdicts.filter((score) => score.source_id === evaluationId && score.trace_id === traceId).map((score) => score.passed);
    expect(passed(nested.evaluationId, stalling.traceId)).toEqual([true]);
    expect(passed(nested.evaluationId, matching.traceId)).toEqual([false]);
    expect(verdicts.filter((score) => score.source_id === stored.evaluationId)).toEqual([]);
    expect([passed(other.evaluationId, stalling.traceId), passed(other.evaluationId, matching.traceId)]).toEqual([[false], [false]]);
  });

  test("a verdict commits with its claim: a failure storing it leaves the trace to the next run, which writes it once", async () => {
    const signal = await client.signals.create(slug, { name: "claimed with its verdict", description: "x", evaluation: rule([{ type: "always" }]) as never });
    const { traceId } = await insertScoredTrace(vigil.ctx, { ...tenant });
    const verdicts = async () => [...(await vigil.ctx.sql<{ id: string }[]>`SELECT id FROM scores WHERE trace_id = ${traceId} AND source_id = ${signal.evaluationId}`)];
    const claims = async () => [
      ...(await vigil.ctx.sql<{ score_id: string | null }[]>`
        SELECT score_id FROM trace_detector_runs WHERE trace_id = ${traceId} AND detector = ${`evaluation:${signal.evaluationId}`}`),
    ];
    const lift = await refuseScoresOf(vigil.ctx, traceId);
    await detectors.runTrace(tenant.organizationId, tenant.projectId, traceId);
    expect([await verdicts(), await claims()]).toEqual([[], []]);
    await lift();
    await detectors.runTrace(tenant.organizationId, tenant.projectId, traceId);
    await detectors.runTrace(tenant.organizationId, tenant.projectId, traceId);
    const written = await verdicts();
    expect(written).toHaveLength(1);
    expect(await claims()).toEqual([{ score_id: written[0]!.id }]);
  });

  test("resolving with keepMonitoring false stops the evaluation; a recurrence regresses a resolved signal", async () => {
    const stop = await client.signals.create(slug, { name: "stopped", description: "x", evaluation: rule([{ type: "always" }]) as never });
    const keep = await client.signals.create(slug, { name: "kept", description: "x", evaluation: rule([{ type: "always" }]) as never });
    await client.signals.resolve(slug, { signalIds: [stop.id], keepMonitoring: false });
    await client.signals.resolve(slug, { signalIds: [keep.id] });
    const { traceId } = await insertScoredTrace(vigil.ctx, { ...tenant });
    await detectors.runTrace(tenant.organizationId, tenant.projectId, traceId);
    const verdicts = await vigil.ctx.sql<{ source_id: string }[]>`SELECT source_id FROM scores WHERE trace_id = ${traceId} AND source = 'evaluation'`;
    expect(verdicts.map((score) => score.source_id)).toContain(keep.evaluationId);
    expect(verdicts.map((score) => score.source_id)).not.toContain(stop.evaluationId);
    await signalsRuntime(vigil.ctx).discovery.drain();
    expect((await client.signals.get(slug, keep.slug)).states).toContain("regressed");
    expect((await client.signals.get(slug, stop.slug)).states).toEqual(["resolved"]);
  });
});

describe("names", () => {
  test("a discovered signal is named by the configured provider through the AI SDK", async () => {
    const { traceId } = await insertScoredTrace(vigil.ctx, { ...tenant });
    await client.annotations.create(slug, { value: 0, passed: false, feedback: "it never finds my order number 5531", trace: { by: "id", id: traceId } } as never);
    await signalsRuntime(vigil.ctx).discovery.drain();
    const found = (await client.signals.list(slug, { query: "orders" })).items;
    expect(found.map((signal) => [signal.name, signal.description, signal.source])).toEqual([["Orders not found", "The agent cannot find the customer's orders.", "annotation"]]);
  });
});

describe("alignment", () => {
  test("metrics against hand-computed confusion matrices, zero denominators included", () => {
    expect(alignmentMetrics({ tp: 1, fp: 1, tn: 0, fn: 1 })).toEqual({
      alignmentMetric: 0.25,
      accuracy: 1 / 3,
      precision: 0.5,
      recall: 0.5,
      specificity: 0,
      trueness: 0.25,
      f1: 0.5,
      balancedAccuracy: 0.25,
      matthewsCorrelationCoefficient: -0.5,
    });
    // tp 8, fp 2, tn 6, fn 4: precision .8, recall 8/12, specificity .75, npv .6.
    const m = alignmentMetrics({ tp: 8, fp: 2, tn: 6, fn: 4 });
    expect(m.accuracy).toBeCloseTo(0.7, 12);
    expect(m.precision).toBeCloseTo(0.8, 12);
    expect(m.recall).toBeCloseTo(2 / 3, 12);
    expect(m.specificity).toBeCloseTo(0.75, 12);
    expect(m.trueness).toBeCloseTo(0.7, 12);
    expect(m.f1).toBeCloseTo((2 * 0.8 * (2 / 3)) / (0.8 + 2 / 3), 12);
    expect(m.balancedAccuracy).toBeCloseTo((2 / 3 + 0.75) / 2, 12);
    expect(m.matthewsCorrelationCoefficient).toBeCloseTo((8 * 6 - 2 * 4) / Math.sqrt(10 * 12 * 8 * 10), 12);
    // Only negatives, all right: every ratio with a zero denominator is 1, MCC undefined is 0.
    expect(alignmentMetrics({ tp: 0, fp: 0, tn: 5, fn: 0 })).toEqual({
      alignmentMetric: 1,
      accuracy: 1,
      precision: 1,
      recall: 1,
      specificity: 1,
      trueness: 1,
      f1: 1,
      balancedAccuracy: 1,
      matthewsCorrelationCoefficient: 0,
    });
    // Every verdict wrong the same way: precision 0, recall 0 → F1's denominator is 0 → 1 by the rule.
    const wrong = alignmentMetrics({ tp: 0, fp: 3, tn: 0, fn: 2 });
    expect(wrong).toMatchObject({ precision: 0, recall: 0, specificity: 0, f1: 1, accuracy: 0, matthewsCorrelationCoefficient: -1 });
    expect(alignmentMetrics({ tp: 0, fp: 0, tn: 0, fn: 0 })).toMatchObject({ accuracy: 1, matthewsCorrelationCoefficient: 0 });
  });

  test("an evaluation's alignment with human annotations on the same traces, recounted when either side changes", async () => {
    const signal = await client.signals.create(slug, { name: "invalid json aligned", description: "x", evaluation: rule([{ type: "json_output", expectation: "invalid" }]) as never });
    const ids = await traces();
    for (const traceId of Object.values(ids)) await detectors.runTrace(tenant.organizationId, tenant.projectId, traceId);
    // Evaluation: A fails, B passes, C fails. Humans: A failed (TP), B failed (FN), C passed (FP).
    const human = (traceId: string, passed: boolean) => client.annotations.create(slug, { value: passed ? 1 : 0, passed, feedback: "reviewed", trace: { by: "id", id: traceId } } as never);
    const annotations = [await human(ids.A, false), await human(ids.B, false), await human(ids.C, true)];
    await refreshAlignment(vigil.ctx.sql);
    const [evaluation] = (await client.signals.get(slug, signal.slug)).evaluations;
    expect(evaluation!.alignment).toEqual(alignmentMetrics({ tp: 1, fp: 1, tn: 0, fn: 1 }));
    // The reviewer changes their mind on B: now a true negative.
    await client.annotations.update(slug, annotations[1]!.id, { passed: true, value: 1 } as never);
    await refreshAlignment(vigil.ctx.sql);
    const [after] = (await client.signals.get(slug, signal.slug)).evaluations;
    expect(after!.alignment).toEqual(alignmentMetrics({ tp: 1, fp: 1, tn: 1, fn: 0 }));
  });

  test("writing either side of a pair updates the alignment read through the client at once, without the job", async () => {
    const signal = await client.signals.create(slug, { name: "invalid json realigned", description: "x", evaluation: rule([{ type: "json_output", expectation: "invalid" }]) as never });
    const ids = await traces();
    const alignment = async () => (await client.signals.get(slug, signal.slug)).evaluations[0]!.alignment;
    // Verdicts on A and B first (A fails, B passes); no human annotation yet, so no pair.
    await detectors.runTrace(tenant.organizationId, tenant.projectId, ids.A);
    await detectors.runTrace(tenant.organizationId, tenant.projectId, ids.B);
    const human = (traceId: string, passed: boolean) => client.annotations.create(slug, { value: passed ? 1 : 0, passed, feedback: "reviewed", trace: { by: "id", id: traceId } } as never);
    // An annotation on A (failed): a true positive, visible as soon as the write returns.
    const onA = await human(ids.A, false);
    expect(await alignment()).toEqual(alignmentMetrics({ tp: 1, fp: 0, tn: 0, fn: 0 }));
    // The reviewer changes their mind on A: a false positive.
    await client.annotations.update(slug, onA.id, { passed: true, value: 1 } as never);
    expect(await alignment()).toEqual(alignmentMetrics({ tp: 0, fp: 1, tn: 0, fn: 0 }));
    // The other side: C is annotated first, then the evaluation's verdict on it (fails, human passed) lands.
    await human(ids.C, true);
    expect(await alignment()).toEqual(alignmentMetrics({ tp: 0, fp: 1, tn: 0, fn: 0 }));
    await detectors.runTrace(tenant.organizationId, tenant.projectId, ids.C);
    expect(await alignment()).toEqual(alignmentMetrics({ tp: 0, fp: 2, tn: 0, fn: 0 }));
  });
});
