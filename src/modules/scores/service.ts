import type { Context } from "../../context";
import { badRequest } from "../../lib/errors";
import { newId } from "../../lib/ids";
import type { Principal } from "../auth/service";
import type { CustomScoreBody, FlatScoreBody, Score, TraceRef } from "./model";
import { scoreStorage } from "./storage";
import type { ScoreRecord, ScoreStore } from "./store";
import { resolveTraceRef, traceHasSpan } from "./trace-ref";

const isoOrNull = (date: Date | null) => (date ? date.toISOString() : null);

/** The fields every score shape shares, annotations included. */
export function presentScoreFields(record: ScoreRecord) {
  return {
    id: record.id,
    organizationId: record.organizationId,
    projectId: record.projectId,
    sessionId: record.sessionId,
    traceId: record.traceId,
    spanId: record.spanId,
    simulationId: record.simulationId,
    signalId: record.signalId,
    value: record.value,
    passed: record.passed,
    feedback: record.feedback,
    error: record.error,
    errored: record.errored,
    duration: record.duration,
    tokens: record.tokens,
    cost: record.cost,
    draftedAt: isoOrNull(record.draftedAt),
    annotatorId: record.annotatorId,
    createdAt: record.createdAt.toISOString(),
    updatedAt: record.updatedAt.toISOString(),
    sourceId: record.sourceId,
  };
}

export const presentScore = (record: ScoreRecord): Score => ({ ...presentScoreFields(record), source: "custom", metadata: record.metadata });

/** Both accepted body forms, reduced to one. */
interface CustomScoreInput {
  trace: TraceRef;
  sourceId: string;
  spanId: string | null;
  sessionId: string | null;
  simulationId: string | null;
  value: number;
  passed: boolean;
  feedback: string;
  error: string | null;
  duration: number;
  tokens: number;
  cost: number;
  metadata: Record<string, unknown>;
}

function customScoreInput(body: CustomScoreBody | FlatScoreBody): CustomScoreInput {
  if (body._evaluation) throw badRequest("_evaluation: evaluation scores are written by Vigil itself; omit it or send false");
  const common = { value: body.value, passed: body.passed, feedback: body.feedback, metadata: body.metadata ?? {} };
  if ("trace" in body) {
    return {
      ...common,
      trace: body.trace,
      sourceId: body.sourceId,
      spanId: null,
      sessionId: null,
      simulationId: body.simulationId ?? null,
      error: body.error ?? null,
      duration: body.duration ?? 0,
      tokens: body.tokens ?? 0,
      cost: body.cost ?? 0,
    };
  }
  return {
    ...common,
    trace: { by: "id", id: body.traceId },
    sourceId: body.source_id,
    spanId: body.spanId?.toLowerCase() ?? null,
    sessionId: body.sessionId ?? null,
    simulationId: null,
    error: null,
    duration: 0,
    tokens: 0,
    cost: 0,
  };
}

export class ScoresService {
  private store: ScoreStore;

  constructor(private ctx: Context) {
    this.store = scoreStorage(ctx).store;
  }

  /** A published custom score on the trace the body names; span and session default to the trace's. */
  async createCustom(principal: Principal, projectId: string, body: CustomScoreBody | FlatScoreBody): Promise<Score> {
    const input = customScoreInput(body);
    const trace = await resolveTraceRef(this.ctx.ch, principal.organizationId, projectId, input.trace);
    if (input.spanId && !(await traceHasSpan(this.ctx.ch, principal.organizationId, projectId, trace, input.spanId))) {
      throw badRequest(`spanId: trace ${trace.traceId} has no span ${input.spanId}`);
    }
    const record = await this.store.insert({
      id: newId(),
      organizationId: principal.organizationId,
      projectId,
      source: "custom",
      sourceId: input.sourceId,
      traceId: trace.traceId,
      spanId: input.spanId ?? trace.lastLlmSpanId,
      sessionId: input.sessionId ?? trace.sessionId,
      simulationId: input.simulationId,
      signalId: null,
      value: input.value,
      passed: input.passed,
      feedback: input.feedback,
      error: input.error,
      duration: input.duration,
      tokens: input.tokens,
      cost: input.cost,
      metadata: input.metadata,
      annotatorId: principal.userId,
      draftedAt: null,
    });
    return presentScore(record);
  }
}
