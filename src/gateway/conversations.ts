import type { Context } from "../context";
import { badRequest, notFound } from "../lib/errors";
import { newId } from "../lib/ids";
import type { Principal } from "../modules/auth/service";
import { scoreStorage } from "../modules/scores/storage";
import { findScoredTrace } from "../modules/scores/trace-ref";
import { assistantMessage, normalizeMessages, type PromptlMessage } from "./messages";
import { compileMetadata, type PromptsService } from "./prompts";
import type { RunsService } from "./runs";
import { emptyUsage, newSpanId, newTraceId, nowNs, recordRunTrace } from "./trace";
import type { VersionsService } from "./versions";

export interface AnnotateBody {
  score: number;
  versionUuid?: string;
  metadata?: { reason?: string };
}

/** What happens to conversations besides running them: reading, logging outside runs, annotating. */
export class ConversationsService {
  constructor(
    private ctx: Context,
    private versions: VersionsService,
    private prompts: PromptsService,
    private runs: RunsService,
  ) {}

  async get(principal: Principal, conversationUuid: string) {
    await this.runs.finished(conversationUuid);
    const row = await this.runs.conversation(principal.organizationId, conversationUuid);
    return { uuid: row.uuid, conversation: row.messages, source: { documentUuid: row.document_uuid, commitUuid: row.version_uuid } };
  }

  /** Records a run made elsewhere as a finished conversation and its trace, without calling a provider. */
  async log(principal: Principal, projectId: string, versionUuid: string, body: { path: string; messages: unknown; response?: string }) {
    const version = await this.versions.resolve(this.ctx.sql, principal.organizationId, projectId, versionUuid);
    const document = await this.prompts.find(this.ctx.sql, version, String(body.path ?? ""));
    let input: PromptlMessage[];
    try {
      input = normalizeMessages(body.messages);
    } catch (error) {
      throw badRequest((error as Error).message);
    }
    if (body.response !== undefined && typeof body.response !== "string") throw badRequest("response: must be a string");
    const output = body.response ? [assistantMessage(body.response, [])] : [];
    const { config } = await compileMetadata(document.content);
    const uuid = crypto.randomUUID();
    const traceId = newTraceId();
    await this.ctx.sql`
      INSERT INTO gateway_conversations (uuid, organization_id, project_id, version_uuid, document_uuid, path, api_key_id, trace_id, config, messages, status)
      VALUES (${uuid}, ${principal.organizationId}, ${version.project.id}, ${version.uuid}, ${document.document_uuid}, ${document.path},
        ${principal.apiKeyId}, ${traceId}, ${this.ctx.sql.json(config as never)}, ${this.ctx.sql.json([...input, ...output] as never)}, 'finished')`;
    const now = nowNs();
    const promptSpan = newSpanId();
    const completionSpan = newSpanId();
    const model = String(config.model ?? "");
    await recordRunTrace(this.ctx.ingest, { organizationId: principal.organizationId, apiKeyId: principal.apiKeyId ?? "" }, {
      traceId,
      rootSpanId: promptSpan,
      startNs: now,
      endNs: now,
      projectId: version.project.id,
      conversationUuid: uuid,
      documentPath: document.path,
      documentUuid: document.document_uuid,
      versionUuid: version.uuid,
      customIdentifier: null,
      operation: "log",
      input,
      output,
      completions: [
        {
          spanId: completionSpan,
          startNs: now,
          endNs: now,
          provider: String(config.provider ?? ""),
          model,
          responseModel: model,
          input,
          output,
          usage: emptyUsage(),
          finishReason: "stop",
          streaming: false,
          firstTokenNs: null,
          error: null,
        },
      ],
      tools: [],
      error: null,
    });
    return { uuid, documentUuid: document.document_uuid, promptSpan: { id: promptSpan, traceId }, completionSpan: { id: completionSpan, traceId } };
  }

  /**
   * A manual evaluation score on the conversation's latest trace: a Vigil score with source
   * `evaluation` (source id the evaluation uuid). Scores outside 0..1 are read as a 1–5 rating.
   */
  async annotate(principal: Principal, conversationUuid: string, evaluationUuid: string, body: AnnotateBody) {
    if (typeof body.score !== "number" || !Number.isFinite(body.score) || body.score < 0) throw badRequest("score: must be a number of at least 0");
    if (evaluationUuid.length > 128) throw badRequest("evaluationUuid: at most 128 characters");
    await this.runs.finished(conversationUuid);
    const row = await this.runs.conversation(principal.organizationId, conversationUuid);
    await this.runs.traceWritten(row.uuid);
    let trace = await findScoredTrace(this.ctx.ch, row.organization_id, row.project_id, row.trace_id);
    if (!trace) {
      await this.ctx.spanWriter.flush();
      trace = await findScoredTrace(this.ctx.ch, row.organization_id, row.project_id, row.trace_id);
    }
    if (!trace) throw notFound("Conversation trace");
    const value = body.score <= 1 ? body.score : Math.min(1, (body.score - 1) / 4);
    const reason = typeof body.metadata?.reason === "string" ? body.metadata.reason : "";
    const record = await scoreStorage(this.ctx).store.insert({
      id: newId(),
      organizationId: row.organization_id,
      projectId: row.project_id,
      source: "evaluation",
      sourceId: evaluationUuid,
      traceId: trace.traceId,
      spanId: trace.lastLlmSpanId,
      sessionId: trace.sessionId,
      simulationId: null,
      signalId: null,
      value,
      passed: value >= 0.5,
      feedback: reason,
      error: null,
      duration: 0,
      tokens: 0,
      cost: 0,
      metadata: { score: body.score, reason, conversationUuid: row.uuid, versionUuid: body.versionUuid ?? row.version_uuid, annotatedBy: principal.userId ?? "API" },
      annotatorId: principal.userId,
      draftedAt: null,
    });
    return { status: "accepted", message: "Annotation recorded", resultUuid: record.id };
  }
}
