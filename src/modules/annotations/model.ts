import { t, type Static } from "elysia";
import { StoredText, textLimits } from "../../lib/validation";
import { scoreFields, TraceId, TraceRef } from "../scores/model";

export { OrganizationProjectParams, ProjectParams } from "../scores/model";

const Index = t.Integer({ minimum: 0 });

export const anchorFields = {
  messageIndex: t.Optional(t.Integer({ minimum: 0, description: "0-based message index in the trace's conversation" })),
  partIndex: t.Optional(t.Integer({ minimum: 0, description: "0-based index into the message's parts; requires messageIndex" })),
  startOffset: t.Optional(t.Integer({ minimum: 0, description: "Inclusive; sent with endOffset and partIndex" })),
  endOffset: t.Optional(t.Integer({ minimum: 0, description: "Exclusive; sent with startOffset and partIndex; ≥ startOffset" })),
  textFormat: t.Optional(t.Literal("pretty-json", { description: "Transform applied to the part's text before the offsets were taken" })),
};
export const AnnotationAnchor = t.Object(anchorFields);
export type AnnotationAnchor = Static<typeof AnnotationAnchor>;

const Cuid = t.String({ minLength: 24, maxLength: 24 });

/** The machine-readable body and the documented one (`traceId`, `issueId`, anchor fields at the top level) in one schema. */
export const CreateAnnotationBody = t.Object({
  value: t.Number({ minimum: 0, maximum: 1 }),
  passed: t.Boolean(),
  feedback: StoredText({ minLength: 1, maxLength: textLimits.feedback }),
  trace: t.Optional(TraceRef),
  traceId: t.Optional(TraceId),
  anchor: t.Optional(AnnotationAnchor),
  ...anchorFields,
  simulationId: t.Optional(t.Nullable(Cuid)),
  signalId: t.Optional(t.Nullable(Cuid)),
  issueId: t.Optional(t.Nullable(Cuid)),
});
export type CreateAnnotationBody = Static<typeof CreateAnnotationBody>;

export const UpdateAnnotationBody = t.Object({
  value: t.Optional(t.Number({ minimum: 0, maximum: 1 })),
  passed: t.Optional(t.Boolean()),
  feedback: t.Optional(StoredText({ minLength: 1, maxLength: textLimits.feedback })),
});
export type UpdateAnnotationBody = Static<typeof UpdateAnnotationBody>;

export const AnnotationMetadata = t.Object(
  {
    rawFeedback: t.String({ description: "The feedback as written" }),
    messageIndex: t.Optional(Index),
    partIndex: t.Optional(Index),
    startOffset: t.Optional(Index),
    endOffset: t.Optional(Index),
    textFormat: t.Optional(t.Literal("pretty-json")),
  },
  { additionalProperties: true },
);

export const Annotation = t.Object({ ...scoreFields, source: t.Literal("annotation"), metadata: AnnotationMetadata });
export type Annotation = Static<typeof Annotation>;

export const AnnotationParams = t.Object({ projectSlug: t.String(), annotationId: t.String() });
export const OrganizationAnnotationParams = t.Object({ organizationId: t.String(), projectId: t.String(), annotationId: t.String() });
export const TraceParams = t.Object({ projectSlug: t.String(), traceId: TraceId });
export const OrganizationTraceParams = t.Object({ organizationId: t.String(), projectId: t.String(), traceId: TraceId });
export const TraceAnnotationParams = t.Object({ projectSlug: t.String(), traceId: TraceId, annotationId: t.String() });
export const OrganizationTraceAnnotationParams = t.Object({ organizationId: t.String(), projectId: t.String(), traceId: TraceId, annotationId: t.String() });
