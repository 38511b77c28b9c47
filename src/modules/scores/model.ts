import { t, type Static } from "elysia";
import { StoredText, textLimits } from "../../lib/validation";
import { TraceFilterSet } from "../traces/model";

export const TraceId = t.String({ pattern: "^[0-9a-fA-F]{32}$", description: "32-character hex trace id" });
export const SpanId = t.String({ pattern: "^[0-9a-fA-F]{16}$", description: "16-character hex span id" });
const Cuid = t.String({ minLength: 24, maxLength: 24 });
const Timestamp = t.String({ format: "date-time" });
const Nanoseconds = t.Integer({ minimum: 0 });

export const ProjectParams = t.Object({ projectSlug: t.String() });
export const OrganizationProjectParams = t.Object({ organizationId: t.String(), projectId: t.String({ description: "Project id or slug" }) });

export const TraceRefById = t.Object({ by: t.Literal("id"), id: TraceId });
export const TraceRefByFilters = t.Object({ by: t.Literal("filters"), filters: TraceFilterSet });
export const TraceRef = t.Union([TraceRefById, TraceRefByFilters], {
  description: "The trace, by id or by a filter set that must match exactly one trace",
});
export type TraceRef = Static<typeof TraceRef>;

/** SPEC.md §2: a score's `sessionId` is at most 128 characters. */
export const maxSessionIdLength = 128;

const Value = t.Number({ minimum: 0, maximum: 1, description: "Normalized score in [0, 1]; higher is better" });
const Metadata = t.Record(t.String(), t.Unknown(), { description: `At most ${textLimits.metadataBytes} bytes of JSON` });
const Feedback = StoredText({ maxLength: textLimits.feedback });

export const CustomScoreBody = t.Object({
  value: Value,
  passed: t.Boolean(),
  feedback: Feedback,
  trace: TraceRef,
  sourceId: t.String({ minLength: 1, maxLength: 128, description: "Your tag for where the score comes from" }),
  simulationId: t.Optional(t.Nullable(Cuid)),
  error: t.Optional(t.Nullable(StoredText({ minLength: 1, maxLength: textLimits.feedback, description: "Generation error text; marks the score errored" }))),
  duration: t.Optional(Nanoseconds),
  tokens: t.Optional(t.Integer({ minimum: 0 })),
  cost: t.Optional(t.Integer({ minimum: 0, description: "Microcents" })),
  metadata: t.Optional(Metadata),
  _evaluation: t.Optional(t.Boolean({ description: "Internal; must be omitted or false" })),
});

export const FlatScoreBody = t.Object({
  traceId: TraceId,
  value: Value,
  passed: t.Boolean(),
  feedback: Feedback,
  source_id: t.String({ minLength: 1, maxLength: 128 }),
  spanId: t.Optional(SpanId),
  sessionId: t.Optional(t.String({ minLength: 1, maxLength: maxSessionIdLength })),
  metadata: t.Optional(Metadata),
  _evaluation: t.Optional(t.Boolean({ description: "Internal; must be omitted or false" })),
});

export const CreateScoreBody = t.Union([CustomScoreBody, FlatScoreBody]);
export type CustomScoreBody = Static<typeof CustomScoreBody>;
export type FlatScoreBody = Static<typeof FlatScoreBody>;

/** Fields every score shape has, annotations included; all always present. */
export const scoreFields = {
  id: t.String(),
  organizationId: t.String(),
  projectId: t.String(),
  sessionId: t.Nullable(t.String()),
  traceId: t.Nullable(t.String()),
  spanId: t.Nullable(t.String()),
  simulationId: t.Nullable(t.String()),
  signalId: t.Nullable(t.String()),
  value: t.Number(),
  passed: t.Boolean(),
  feedback: t.String(),
  error: t.Nullable(t.String()),
  errored: t.Boolean(),
  duration: Nanoseconds,
  tokens: t.Integer({ minimum: 0 }),
  cost: t.Integer({ minimum: 0 }),
  draftedAt: t.Nullable(Timestamp),
  annotatorId: t.Nullable(t.String()),
  createdAt: Timestamp,
  updatedAt: Timestamp,
  sourceId: t.String(),
};

export const Score = t.Object({ ...scoreFields, source: t.Literal("custom"), metadata: Metadata });
export type Score = Static<typeof Score>;
