import { t, type Static } from "elysia";

const TraceId = t.String({ minLength: 32, maxLength: 32, description: "32-character trace id" });
const SpanId = t.String({ minLength: 16, maxLength: 16, description: "16-character span id" });
const Timestamp = t.String({ description: "ISO-8601 UTC" });
const NullableString = t.Union([t.String(), t.Null()]);

export const TraceParams = t.Object({ traceId: TraceId }, { additionalProperties: true });
export const SpanParams = t.Object({ traceId: TraceId, spanId: SpanId }, { additionalProperties: true });
export const SessionParams = t.Object({ sessionId: t.String({ minLength: 1, maxLength: 128 }) }, { additionalProperties: true });
export const ExportParams = t.Object({ exportId: t.String() });
export const ExportDownloadQuery = t.Object({ token: t.String({ description: "Secret from the emailed link" }) });

export const FilterCondition = t.Object({
  op: t.String({ description: "eq, neq, gt, gte, lt, lte, in, notIn, contains, notContains, gtePercentile" }),
  value: t.Unknown({ description: "string, number, boolean, or an array of strings/numbers for in and notIn" }),
});
export const TraceFilterSet = t.Record(t.String(), t.Array(FilterCondition), {
  description:
    "Field name to conditions, all ANDed: status, name, traceId, sessionId, simulationId, userId, tags, models, providers, serviceNames, tools, definedTools, duration, ttft, cost, spanCount, errorCount, tokensInput, tokensOutput, cacheHitRate, startTime, endTime, metadata.<key>, score.*",
});

export const sortFields = ["relevance", "startTime", "endTime", "durationNs", "tokensTotal", "costTotalMicrocents"] as const;
export type SortField = (typeof sortFields)[number];
export type SortDirection = "asc" | "desc";

export const ListTracesBody = t.Object({
  cursor: t.Optional(t.String({ description: "`nextCursor` of the previous page" })),
  limit: t.Optional(t.Integer({ minimum: 1, maximum: 200, default: 50 })),
  sortBy: t.Optional(t.UnionEnum([...sortFields], { default: "startTime" })),
  sortDirection: t.Optional(t.UnionEnum(["asc", "desc"], { default: "desc" })),
  query: t.Optional(t.String({ maxLength: 500, description: "Search over input and output messages, ANDed with filters" })),
  filters: t.Optional(TraceFilterSet),
});
export type ListTracesBody = Static<typeof ListTracesBody>;

export const Trace = t.Object({
  organizationId: t.String(),
  projectId: t.String(),
  traceId: t.String(),
  spanCount: t.Integer(),
  errorCount: t.Integer(),
  startTime: Timestamp,
  endTime: Timestamp,
  durationNs: t.Number(),
  timeToFirstTokenNs: t.Number(),
  tokensInput: t.Number(),
  tokensOutput: t.Number(),
  tokensCacheRead: t.Number(),
  tokensCacheCreate: t.Number(),
  tokensReasoning: t.Number(),
  tokensTotal: t.Number(),
  costInputMicrocents: t.Number(),
  costOutputMicrocents: t.Number(),
  costTotalMicrocents: t.Number(),
  sessionId: NullableString,
  userId: NullableString,
  simulationId: NullableString,
  tags: t.Array(t.String()),
  models: t.Array(t.String()),
  providers: t.Array(t.String()),
  serviceNames: t.Array(t.String()),
  rootSpanId: NullableString,
  rootSpanName: NullableString,
  positiveAnnotationCount: t.Integer(),
  negativeAnnotationCount: t.Integer(),
});
export type Trace = Static<typeof Trace>;

export const PaginatedTraces = t.Object({ items: t.Array(Trace), nextCursor: NullableString, hasMore: t.Boolean() });

const GenAiMessage = t.Record(t.String(), t.Unknown(), { description: "OpenTelemetry GenAI message: role, parts" });
export type GenAiMessage = Static<typeof GenAiMessage>;

export const TraceDetail = t.Composite([
  Trace,
  t.Object({
    metadata: t.Record(t.String(), t.String()),
    conversation: t.Array(GenAiMessage, { description: "System instructions, then the input and output of the last LLM-completion span" }),
  }),
]);
export type TraceDetail = Static<typeof TraceDetail>;

const spanKinds = ["unspecified", "internal", "server", "client", "producer", "consumer"] as const;
const statusCodes = ["unset", "ok", "error"] as const;

export const Span = t.Object({
  organizationId: t.String(),
  projectId: t.String(),
  traceId: t.String(),
  spanId: t.String(),
  parentSpanId: NullableString,
  sessionId: NullableString,
  userId: NullableString,
  simulationId: NullableString,
  apiKeyId: NullableString,
  startTime: Timestamp,
  endTime: Timestamp,
  name: t.String(),
  serviceName: t.String(),
  kind: t.UnionEnum([...spanKinds]),
  statusCode: t.UnionEnum([...statusCodes]),
  statusMessage: t.String(),
  traceFlags: t.Number(),
  traceState: t.String(),
  errorType: NullableString,
  tags: t.Array(t.String()),
  operation: t.String(),
  provider: NullableString,
  model: NullableString,
  responseModel: NullableString,
  tokensInput: t.Number(),
  tokensOutput: t.Number(),
  tokensCacheRead: t.Number(),
  tokensCacheCreate: t.Number(),
  tokensReasoning: t.Number(),
  costInputMicrocents: t.Number(),
  costOutputMicrocents: t.Number(),
  costTotalMicrocents: t.Number(),
  costIsEstimated: t.Boolean(),
  timeToFirstTokenNs: t.Number(),
  isStreaming: t.Boolean(),
  responseId: NullableString,
  finishReasons: t.Array(t.String()),
  scopeName: t.String(),
  scopeVersion: t.String(),
  retentionDays: t.Optional(t.Integer({ minimum: 1 })),
  ingestedAt: Timestamp,
});
export type Span = Static<typeof Span>;
export type SpanKind = (typeof spanKinds)[number];
export type SpanStatusCode = (typeof statusCodes)[number];

export const TraceSpans = t.Object({ items: t.Array(Span) });

const ToolDefinition = t.Object({ name: t.String(), description: t.String(), parameters: t.Optional(t.Unknown()) });
export type ToolDefinition = Static<typeof ToolDefinition>;

export const SpanDetail = t.Composite([
  Span,
  t.Object({
    metadata: t.Record(t.String(), t.String()),
    systemInstructions: t.Array(t.Record(t.String(), t.Unknown())),
    inputMessages: t.Array(GenAiMessage),
    outputMessages: t.Array(GenAiMessage),
    toolDefinitions: t.Array(ToolDefinition),
    toolCallId: t.String(),
    toolName: t.String(),
    toolInput: t.String(),
    toolOutput: t.String(),
    attrString: t.Record(t.String(), t.String()),
    attrInt: t.Record(t.String(), t.Number()),
    attrFloat: t.Record(t.String(), t.Number()),
    attrBool: t.Record(t.String(), t.Boolean()),
    resourceString: t.Record(t.String(), t.String()),
    eventsJson: t.String(),
    linksJson: t.String(),
  }),
]);
export type SpanDetail = Static<typeof SpanDetail>;

export const AnalyticsQuery = t.Object({
  fromIso: t.Optional(t.String({ description: "Inclusive start, ISO-8601; default 7 days before toIso" })),
  toIso: t.Optional(t.String({ description: "Inclusive end, ISO-8601; default now" })),
});

const Buckets = t.Array(t.Object({ bucket: Timestamp, value: t.Number() }), { description: "12-hour UTC buckets" });
export const TraceAnalyticsResponse = t.Object({
  traces: t.Object({ total: t.Number(), buckets: Buckets }),
  cost: t.Object({ total: t.Number({ description: "USD" }), buckets: Buckets }),
  duration: t.Object({ median: t.Number({ description: "seconds" }), buckets: Buckets }),
  tokens: t.Object({ total: t.Number(), buckets: Buckets }),
  timeToFirstToken: t.Object({ median: t.Number({ description: "seconds" }), buckets: Buckets }),
  spans: t.Object({ total: t.Number(), buckets: Buckets }),
});
export type TraceAnalyticsResponse = Static<typeof TraceAnalyticsResponse>;

export const MemoryQuery = t.Object({ traceId: t.Optional(TraceId) });

export const SessionMemorySummary = t.Object({
  records: t.Array(
    t.Object({ storeId: t.String(), recordId: t.String(), readTokens: t.Integer(), tokensAdded: t.Integer(), tokensRemoved: t.Integer() }),
  ),
  total: t.Object({ readTokens: t.Integer(), tokensAdded: t.Integer(), tokensRemoved: t.Integer(), writeRecords: t.Integer() }),
});
export type SessionMemorySummary = Static<typeof SessionMemorySummary>;

export const SessionMemoryChanges = t.Object({
  records: t.Array(
    t.Object({
      storeId: t.String(),
      recordId: t.String(),
      kind: t.UnionEnum(["added", "updated", "removed"]),
      beforeBody: NullableString,
      afterBody: NullableString,
      tokensAdded: t.Integer(),
      tokensRemoved: t.Integer(),
      degraded: t.Boolean(),
      lastChangeSpanId: NullableString,
    }),
  ),
});
export type SessionMemoryChanges = Static<typeof SessionMemoryChanges>;

export const ExportTracesBody = t.Object({
  traces: t.Union([
    t.Object({ by: t.Literal("ids"), ids: t.Array(TraceId, { minItems: 1, maxItems: 100_000 }) }),
    t.Object({ by: t.Literal("filters"), filters: TraceFilterSet }),
  ]),
  recipient: t.String({ format: "email", description: "Email of a member of the organization" }),
});
export type ExportTracesBody = Static<typeof ExportTracesBody>;

export const ExportTracesResponse = t.Object({ status: t.Literal("queued") });
