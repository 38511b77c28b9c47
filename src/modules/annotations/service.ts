import type { Context } from "../../context";
import { badRequest, notFound } from "../../lib/errors";
import { newId } from "../../lib/ids";
import { cursorMicros, decodeCursor, pageLimit, toPage, type Page } from "../../lib/pagination";
import type { Principal } from "../auth/service";
import { presentScoreFields } from "../scores/service";
import { scoreStorage } from "../scores/storage";
import type { ScoreRecord, ScoreStore } from "../scores/store";
import { findScoredTrace, resolveTraceRef, type ScoredTrace } from "../scores/trace-ref";
import { checkAnchorInConversation, checkAnchorShape } from "./anchor";
import { loadConversation } from "./conversation";
import type { Annotation, AnnotationAnchor, CreateAnnotationBody, UpdateAnnotationBody } from "./model";

/** The `sourceId` sentinels of annotations made with an API key and by Vigil's own writers. */
const apiSource = "API";
const systemSource = "SYSTEM";

export const presentAnnotation = (record: ScoreRecord): Annotation => ({
  ...presentScoreFields(record),
  source: "annotation",
  metadata: record.metadata as Annotation["metadata"],
});

const anchorKeys = ["messageIndex", "partIndex", "startOffset", "endOffset", "textFormat"] as const;

/** The anchor of either body form: the `anchor` object, or anchor fields at the top level. */
function anchorOf(body: CreateAnnotationBody): AnnotationAnchor {
  const topLevel = Object.fromEntries(anchorKeys.filter((key) => body[key] !== undefined).map((key) => [key, body[key]]));
  if (body.anchor && Object.keys(topLevel).length > 0) throw badRequest("anchor: send the anchor fields inside anchor or at the top level, not both");
  return body.anchor ?? topLevel;
}

function aliased<T>(name: string, alias: string, value: T | undefined, aliasValue: T | undefined): T | undefined {
  if (value !== undefined && aliasValue !== undefined) throw badRequest(`${name}: send ${name} or its alias ${alias}, not both`);
  return value ?? aliasValue;
}

export interface SystemDraft {
  organizationId: string;
  projectId: string;
  traceId: string;
  value: number;
  passed: boolean;
  feedback: string;
  signalId?: string | null;
  metadata?: Record<string, unknown>;
}

export class AnnotationsService {
  private store: ScoreStore;

  constructor(private ctx: Context) {
    this.store = scoreStorage(ctx).store;
  }

  /**
   * A published annotation by an API caller. A user credential authors it: `sourceId` and
   * `annotatorId` are the user's id. An API key has no user: `sourceId` is "API".
   */
  async create(principal: Principal, projectId: string, body: CreateAnnotationBody): Promise<Annotation> {
    if (!body.feedback.trim()) throw badRequest("feedback: must not be blank");
    const traceRef = aliased("trace", "traceId", body.trace, body.traceId === undefined ? undefined : { by: "id" as const, id: body.traceId });
    if (!traceRef) throw badRequest("trace: is required (or its alias traceId)");
    const signalId = aliased("signalId", "issueId", body.signalId, body.issueId) ?? null;
    const anchor = anchorOf(body);
    checkAnchorShape(anchor);
    const trace = await resolveTraceRef(this.ctx.ch, principal.organizationId, projectId, traceRef);
    if (anchor.messageIndex !== undefined) {
      checkAnchorInConversation(anchor, await loadConversation(this.ctx.ch, principal.organizationId, projectId, trace));
    }
    const record = await this.store.insert({
      ...this.annotationOn(trace, principal.organizationId, projectId),
      sourceId: principal.userId ?? apiSource,
      simulationId: body.simulationId ?? null,
      signalId,
      value: body.value,
      passed: body.passed,
      feedback: body.feedback,
      metadata: { rawFeedback: body.feedback, ...anchor },
      annotatorId: principal.userId,
      draftedAt: null,
    });
    return presentAnnotation(record);
  }

  /** A drafted annotation by one of Vigil's own writers (flaggers): counts nowhere until published. */
  async createSystemDraft(draft: SystemDraft): Promise<Annotation> {
    const trace = await resolveTraceRef(this.ctx.ch, draft.organizationId, draft.projectId, { by: "id", id: draft.traceId });
    const record = await this.store.insert({
      ...this.annotationOn(trace, draft.organizationId, draft.projectId),
      sourceId: systemSource,
      simulationId: null,
      signalId: draft.signalId ?? null,
      value: draft.value,
      passed: draft.passed,
      feedback: draft.feedback,
      metadata: { ...draft.metadata, rawFeedback: draft.feedback },
      annotatorId: null,
      draftedAt: new Date(),
    });
    return presentAnnotation(record);
  }

  async get(projectId: string, annotationId: string, traceId?: string): Promise<Annotation> {
    const record = await this.store.get(projectId, annotationId, "annotation");
    if (!record || (traceId !== undefined && record.traceId !== traceId.toLowerCase())) throw notFound("Annotation");
    return presentAnnotation(record);
  }

  async update(projectId: string, annotationId: string, body: UpdateAnnotationBody): Promise<Annotation> {
    if (body.feedback !== undefined && !body.feedback.trim()) throw badRequest("feedback: must not be blank");
    const record = await this.store.update(projectId, annotationId, "annotation", {
      value: body.value,
      passed: body.passed,
      feedback: body.feedback,
      metadata: body.feedback === undefined ? undefined : { rawFeedback: body.feedback },
    });
    if (!record) throw notFound("Annotation");
    return presentAnnotation(record);
  }

  async delete(projectId: string, annotationId: string): Promise<void> {
    if (!(await this.store.delete(projectId, annotationId, "annotation"))) throw notFound("Annotation");
  }

  /** Confirms a draft (`draftedAt` → null); publishing a published annotation changes nothing. */
  async publish(projectId: string, annotationId: string): Promise<Annotation> {
    const record = await this.store.publish(projectId, annotationId, "annotation");
    if (!record) throw notFound("Annotation");
    return presentAnnotation(record);
  }

  /** A trace's annotations, drafts included, newest first; 404 for a trace that is not stored. */
  async listByTrace(organizationId: string, projectId: string, traceId: string, query: { cursor?: string; limit?: number }): Promise<Page<Annotation>> {
    const limit = pageLimit(query.limit);
    const after = query.cursor ? decodeCursor(query.cursor, 2) : null;
    if (after) cursorMicros(after[0]!);
    const [trace, rows] = await Promise.all([
      findScoredTrace(this.ctx.ch, organizationId, projectId, traceId),
      this.store.pageByTrace(projectId, traceId.toLowerCase(), "annotation", limit + 1, after && { createdAtMicros: after[0]!, id: after[1]! }),
    ]);
    if (!trace) throw notFound("Trace");
    return toPage(rows, limit, (row) => presentAnnotation(row.record), (row) => [row.key.createdAtMicros, row.key.id]);
  }

  private annotationOn(trace: ScoredTrace, organizationId: string, projectId: string) {
    return {
      id: newId(),
      organizationId,
      projectId,
      source: "annotation" as const,
      traceId: trace.traceId,
      spanId: trace.lastLlmSpanId,
      sessionId: trace.sessionId,
      error: null,
      duration: 0,
      tokens: 0,
      cost: 0,
    };
  }
}
