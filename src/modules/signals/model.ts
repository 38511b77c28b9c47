import { t, type Static } from "elysia";
import { FilterCondition } from "../traces/model";

const Iso = t.String({ description: "ISO-8601 timestamp" });
const NullableIso = t.Union([Iso, t.Null()]);

export const signalSources = ["annotation", "flagger", "custom"] as const;
export const signalStates = ["new", "escalating", "ongoing", "resolved", "regressed", "ignored"] as const;
export type SignalState = (typeof signalStates)[number];

export const ProjectParams = t.Object({ projectSlug: t.String() });
export const SignalParams = t.Object({ projectSlug: t.String(), signalSlug: t.String() });
export const SessionParams = t.Object({ projectSlug: t.String(), sessionId: t.String({ minLength: 1, maxLength: 128 }) });
export const SessionSignalParams = t.Object({ projectSlug: t.String(), sessionId: t.String({ minLength: 1, maxLength: 128 }), signalSlug: t.String() });
export const UserParams = t.Object({ projectSlug: t.String(), userId: t.String({ minLength: 1 }) });

/** An Agent Score dimension a signal informs and how (the SDK's `SignalScoreEvidence`). */
export const ScoreEvidence = t.Union([
  t.Object({ scoreDimension: t.Literal("outcome"), role: t.Literal("taskOutcome") }),
  t.Object({ scoreDimension: t.Literal("reliability"), role: t.UnionEnum(["completionOutcome", "operationalIncident"]) }),
  t.Object({ scoreDimension: t.Literal("cost"), role: t.Literal("spendEfficiency") }),
  t.Object({ scoreDimension: t.Literal("speed"), role: t.Literal("criticalPathEfficiency") }),
  t.Object({ scoreDimension: t.Literal("safety"), role: t.UnionEnum(["confirmedHarm", "exposure"]) }),
]);
export type ScoreEvidence = Static<typeof ScoreEvidence>;
const TrendBucket = t.Object({ bucket: t.String({ description: "UTC day, YYYY-MM-DD" }), count: t.Integer() });

const signalCore = {
  id: t.String(),
  organizationId: t.String(),
  projectId: t.String(),
  slug: t.String(),
  name: t.String(),
  description: t.String(),
  source: t.UnionEnum(signalSources),
  scoreEvidence: t.Array(ScoreEvidence),
  states: t.Array(t.UnionEnum(signalStates)),
  resolvedAt: NullableIso,
  ignoredAt: NullableIso,
  regressedAt: NullableIso,
  mutedAt: NullableIso,
  createdAt: Iso,
  updatedAt: Iso,
};

export const Signal = t.Object({
  ...signalCore,
  trend: t.Array(TrendBucket, { description: "Daily occurrence counts over the past 14 days" }),
  tags: t.Array(t.String()),
  firstSeenAt: Iso,
  lastSeenAt: Iso,
  occurrences: t.Integer(),
  affectedSessionsPercent: t.Number({ minimum: 0, maximum: 1 }),
});
export type Signal = Static<typeof Signal>;

export const EvaluationAlignmentMetrics = t.Object({
  alignmentMetric: t.Number({ description: "Balanced accuracy" }),
  accuracy: t.Number(),
  precision: t.Number(),
  recall: t.Number(),
  specificity: t.Number(),
  trueness: t.Number(),
  f1: t.Number(),
  balancedAccuracy: t.Number(),
  matthewsCorrelationCoefficient: t.Number(),
});
export type EvaluationAlignmentMetrics = Static<typeof EvaluationAlignmentMetrics>;

export const Evaluation = t.Object({
  id: t.String(),
  name: t.String(),
  description: t.String(),
  alignedAt: NullableIso,
  archivedAt: NullableIso,
  deletedAt: NullableIso,
  createdAt: Iso,
  updatedAt: Iso,
  sampling: t.Integer({ minimum: 0, maximum: 100 }),
  alignment: t.Union([EvaluationAlignmentMetrics, t.Null()]),
});
export type Evaluation = Static<typeof Evaluation>;

const SignalFeedback = t.Object({ value: t.Number(), passed: t.Boolean(), feedback: t.String() });

export const SignalDetail = t.Object({
  ...signalCore,
  trend: t.Array(TrendBucket),
  tags: t.Array(t.String()),
  firstSeenAt: NullableIso,
  lastSeenAt: NullableIso,
  occurrences: t.Integer(),
  affectedSessionsPercent: t.Number({ minimum: 0, maximum: 1 }),
  evaluations: t.Array(Evaluation),
  monitoringState: t.Object({ kind: t.UnionEnum(["automatic", "idle", "generating", "realigning", "failed"]) }, { additionalProperties: true }),
  feedback: t.Union([SignalFeedback, t.Null()]),
});
export type SignalDetail = Static<typeof SignalDetail>;

export const PaginatedSignals = t.Object({ items: t.Array(Signal), nextCursor: t.Union([t.String(), t.Null()]), hasMore: t.Boolean() });

export const ListSignalsQuery = t.Object({
  cursor: t.Optional(t.String()),
  limit: t.Optional(t.Integer()),
  query: t.Optional(t.String({ description: "Words searched in the signals' names and descriptions" })),
  // Literal unions, not UnionEnum: Elysia fills an omitted optional UnionEnum with its first value.
  lifecycleGroup: t.Optional(t.Union([t.Literal("active"), t.Literal("archived")])),
  sortBy: t.Optional(t.Union([t.Literal("lastSeen"), t.Literal("occurrences"), t.Literal("state")])),
  sortDirection: t.Optional(t.Union([t.Literal("asc"), t.Literal("desc")])),
  fromIso: t.Optional(Iso),
  toIso: t.Optional(Iso),
});
export type ListSignalsQuery = Static<typeof ListSignalsQuery>;

export const RangeQuery = t.Object({ fromIso: t.Optional(Iso), toIso: t.Optional(Iso) });
export const PageQuery = t.Object({ cursor: t.Optional(t.String()), limit: t.Optional(t.Integer()) });
export const LimitQuery = t.Object({ limit: t.Optional(t.Integer()) });

const SignalFilters = t.Record(t.String(), t.Union([t.Array(FilterCondition), t.Null()]), {
  description: "Row-local trace filters (the trace list's filter DSL) gating which traces the evaluation runs on",
});

const comparison = t.UnionEnum(["gt", "gte", "lt", "lte"]);
export const RuleCondition = t.Union([
  t.Object({
    type: t.Literal("text_match"),
    scope: t.Optional(t.UnionEnum(["last_assistant", "any_assistant", "any_user", "any_tool", "conversation"])),
    operator: t.UnionEnum(["contains", "not_contains", "matches_regex", "not_matches_regex"]),
    value: t.String(),
    caseSensitive: t.Optional(t.Boolean()),
  }),
  t.Object({ type: t.Literal("empty_output") }),
  t.Object({ type: t.Literal("output_length"), unit: t.Optional(t.UnionEnum(["chars", "words"])), operator: comparison, value: t.Number() }),
  t.Object({ type: t.Literal("json_output"), expectation: t.UnionEnum(["valid", "invalid"]) }),
  t.Object({
    type: t.Literal("metric"),
    field: t.UnionEnum(["duration", "cost", "tokensTotal", "tokensInput", "tokensOutput", "errorCount", "traceCount", "spanCount"]),
    aggregation: t.Optional(t.UnionEnum(["session", "anyTrace", "allTraces"])),
    operator: comparison,
    value: t.Number(),
  }),
  t.Object({ type: t.Literal("tool_used"), toolName: t.String() }),
  t.Object({ type: t.Literal("tool_failed"), toolName: t.Optional(t.String()) }),
  t.Object({ type: t.Literal("tool_call_count"), operator: comparison, value: t.Number() }),
  t.Object({ type: t.Literal("error") }),
  t.Object({ type: t.Literal("finish_reason"), value: t.String() }),
  t.Object({ type: t.Literal("semantic_similarity"), query: t.String(), operator: t.Optional(comparison), threshold: t.Number() }),
  t.Object({ type: t.Literal("always") }),
]);
export type RuleCondition = Static<typeof RuleCondition>;

export const EvaluationSettings = t.Union([
  t.Object({ kind: t.Literal("judge"), criteria: t.String({ minLength: 1 }) }),
  t.Object({ kind: t.Literal("rule"), match: t.Optional(t.UnionEnum(["all", "any"])), conditions: t.Array(RuleCondition, { minItems: 1 }) }),
]);
export type EvaluationSettings = Static<typeof EvaluationSettings>;

export const CreateSignalBody = t.Object({
  name: t.String({ minLength: 1, maxLength: 200 }),
  description: t.String({ maxLength: 5000 }),
  priority: t.Optional(t.Union([t.Literal("low"), t.Literal("medium"), t.Literal("high"), t.Literal("urgent"), t.Null()])),
  filters: t.Optional(t.Union([SignalFilters, t.Null()])),
  evaluation: t.Object(
    { settings: t.Optional(t.Unknown()), script: t.Optional(t.String()) },
    { description: "Exactly one of `settings` (judge or rule) or `script`; scripts are not supported by Vigil" },
  ),
});
export type CreateSignalBody = Static<typeof CreateSignalBody>;
export const CreateSignalResponse = t.Object({ id: t.String(), slug: t.String(), evaluationId: t.String() });

export const UpdateSignalBody = t.Object({
  name: t.Optional(t.String({ minLength: 1, maxLength: 200 })),
  description: t.Optional(t.String({ maxLength: 5000 })),
  filters: t.Optional(t.Union([SignalFilters, t.Null()])),
});
export type UpdateSignalBody = Static<typeof UpdateSignalBody>;
export const UpdateSignalResponse = t.Object({ id: t.String(), slug: t.String(), changed: t.Boolean() });

export const LifecycleBody = t.Object({ signalIds: t.Array(t.String(), { minItems: 1, maxItems: 1000 }) });
export const ResolveBody = t.Object({ signalIds: t.Array(t.String(), { minItems: 1, maxItems: 1000 }), keepMonitoring: t.Optional(t.Boolean()) });
export const LifecycleResponse = t.Object({
  items: t.Array(
    t.Object({ signalId: t.String(), resolvedAt: NullableIso, ignoredAt: NullableIso, regressedAt: NullableIso, mutedAt: NullableIso, updatedAt: Iso, changed: t.Boolean() }),
  ),
});

const CountTotal = t.Object({ total: t.Integer() });
export const SignalAnalytics = t.Object({
  ongoing: CountTotal,
  new: CountTotal,
  escalating: CountTotal,
  resolved: CountTotal,
  ignored: CountTotal,
  occurrences: t.Object({ total: t.Integer(), buckets: t.Array(t.Object({ bucket: Iso, value: t.Integer() })) }),
});
export const SignalHistogram = t.Object({ buckets: t.Array(t.Object({ bucket: Iso, count: t.Integer() })) });

export const FeedbackBody = t.Object({
  passed: t.Boolean(),
  feedback: t.Optional(t.String()),
  value: t.Optional(t.Number({ minimum: 0, maximum: 1 })),
  ignore: t.Optional(t.Boolean()),
});
export const FeedbackResponse = t.Object({ value: t.Number(), passed: t.Boolean(), feedback: t.String(), ignored: t.Boolean() });

export const ExportBody = t.Object({
  recipient: t.String({ minLength: 3 }),
  signalIds: t.Optional(t.Array(t.String())),
  lifecycleGroup: t.Optional(t.Union([t.Literal("active"), t.Literal("archived")])),
});
export const ExportResponse = t.Object({ status: t.Literal("queued") });
export const MonitorResponse = t.Object({ jobId: t.String(), evaluationId: t.Union([t.String(), t.Null()]) });

export const SessionSignal = t.Object({ ...signalCore, occurrences: t.Integer(), firstSeenAt: Iso, lastSeenAt: Iso, traceIds: t.Array(t.String()) });
export type SessionSignal = Static<typeof SessionSignal>;
export const SessionSignals = t.Object({ items: t.Array(SessionSignal) });

export const UserSignal = t.Object({
  signalId: t.String(),
  name: t.String(),
  description: t.String(),
  states: t.Array(t.String()),
  priority: t.Union([t.String(), t.Null()]),
  occurrences: t.Integer(),
  affectedTraces: t.Integer(),
  firstSeenAt: Iso,
  lastSeenAt: Iso,
});
export const UserSignals = t.Object({ items: t.Array(UserSignal) });
