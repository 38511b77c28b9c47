import { Chain, CompileError } from "promptl-ai";
import { jsonSchema, Output, streamText, tool, type LanguageModelUsage, type ToolSet } from "ai";
import type { Context } from "../context";
import { badRequest, conflict, notFound } from "../lib/errors";
import type { Principal } from "../modules/auth/service";
import { GatewayError, runError, type RunErrorCode } from "./errors";
import { isTerminal, type RunEvent, type RunEventBus } from "./events";
import { assistantMessage, normalizeMessages, toModelMessages, toolMessage, type PromptlMessage, type ToolCall } from "./messages";
import { compileError, compileMetadata, type PromptsService } from "./prompts";
import { ProviderConfigError, type ProviderResolver } from "./providers";
import { addUsage, costOf, emptyUsage, newSpanId, newTraceId, nowNs, recordRunTrace, type CompletionSpan, type RunTraceRecord, type ToolSpan, type Usage } from "./trace";
import type { VersionsService } from "./versions";

/** A client tool's result is awaited this long before the run fails. */
const toolResultTimeoutMs = 10 * 60_000;
export const BACKGROUND_QUEUE = "gateway-run";

export interface RunBody {
  path: string;
  parameters?: Record<string, unknown>;
  stream?: boolean;
  background?: boolean;
  messages?: unknown[];
  userMessage?: string;
  customIdentifier?: string;
  tools?: string[];
}

/** The provider's answer as the gateway client reads it (`response` of provider-completed and of the final body). */
export interface RunResponse {
  streamType: "text" | "object";
  text: string;
  object?: unknown;
  usage: Usage;
  toolCalls: ToolCall[];
  cost: number;
  input: PromptlMessage[];
  output: PromptlMessage[];
  model: string;
  provider: string;
  documentLogUuid: string;
}

export interface FinalBody {
  uuid: string;
  conversation: PromptlMessage[];
  response: RunResponse;
  source: { documentUuid: string; commitUuid: string };
}

/** What a worker needs to execute a run: stored with a background run. */
interface RunPlan {
  kind: "run" | "chat";
  content: string;
  parameters: Record<string, unknown>;
  /** For a run: messages appended after the compiled prompt; for a chat: the whole conversation so far. */
  messages: PromptlMessage[];
  clientTools: string[];
}

interface ConversationRow {
  uuid: string;
  organization_id: string;
  project_id: string;
  version_uuid: string;
  document_uuid: string;
  path: string;
  api_key_id: string | null;
  custom_identifier: string | null;
  trace_id: string;
  config: Record<string, unknown>;
  messages: PromptlMessage[];
  request: RunPlan | null;
  status: "queued" | "running" | "finished" | "failed" | "stopped";
  final_event: FinalBody | null;
}

/** One run executing in this process: its events go to local listeners and to the bus. */
export class ActiveRun {
  private nextId = 0;
  private history: RunEvent[] = [];
  private listeners = new Set<(event: RunEvent) => void>();
  readonly controller = new AbortController();
  /** Resolves with the final body or a GatewayError, never rejects. */
  result!: Promise<FinalBody | GatewayError>;
  /** Resolves once the run's events are all stored as well. */
  settled!: Promise<void>;
  conversation: PromptlMessage[] = [];

  constructor(
    readonly row: ConversationRow,
    private write: (event: RunEvent) => void,
  ) {}

  get uuid() {
    return this.row.uuid;
  }

  get source() {
    return { documentUuid: this.row.document_uuid, commitUuid: this.row.version_uuid };
  }

  emit(event: RunEvent["event"], data: Record<string, unknown>) {
    const frame: RunEvent = { id: this.nextId++, event, data, json: JSON.stringify(data) };
    this.history.push(frame);
    this.write(frame);
    for (const listener of this.listeners) listener(frame);
  }

  /** Every event so far, then each new one as it happens; returns the unsubscribe. */
  subscribe(listener: (event: RunEvent) => void): () => void {
    for (const event of this.history) listener(event);
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  latitude(type: string, data: Record<string, unknown> = {}) {
    this.emit("latitude-event", { type, timestamp: Date.now(), messages: this.conversation, uuid: this.uuid, source: this.source, ...data });
  }
}

function toUsage(usage: LanguageModelUsage | undefined): Usage {
  const input = usage?.inputTokens ?? 0;
  const output = usage?.outputTokens ?? 0;
  return {
    inputTokens: input,
    outputTokens: output,
    promptTokens: input,
    completionTokens: output,
    totalTokens: usage?.totalTokens ?? input + output,
    reasoningTokens: usage?.outputTokenDetails?.reasoningTokens ?? 0,
    cachedInputTokens: usage?.inputTokenDetails?.cacheReadTokens ?? 0,
  };
}

/** PromptL's `tools` config (an object by name, or a list of such objects) as AI SDK tools without `execute`. */
function toolSet(config: unknown): ToolSet | undefined {
  const entries = Array.isArray(config) ? config.flatMap((item) => Object.entries(item as object)) : config && typeof config === "object" ? Object.entries(config) : [];
  if (!entries.length) return undefined;
  return Object.fromEntries(
    entries.map(([name, definition]) => {
      const { description, parameters } = (definition ?? {}) as { description?: string; parameters?: object };
      return [name, tool({ description, inputSchema: jsonSchema((parameters ?? { type: "object", properties: {} }) as never) })];
    }),
  );
}

/** Why a run failed, as the client's run error codes say. */
function classify(error: unknown, signal: AbortSignal): GatewayError {
  if (error instanceof GatewayError) return error;
  if (signal.aborted) return runError("abort_error", "The run was stopped", 422);
  if (error instanceof ProviderConfigError) return runError("ai_provider_config_error", error.message, 422);
  if (error instanceof CompileError) return runError("chain_compile_error", error.message, 422);
  const message = (error as Error)?.message || String(error);
  return runError("ai_run_error", message, 422);
}

const numberOr = (value: unknown) => (typeof value === "number" ? value : undefined);

export class RunsService {
  private active = new Map<string, ActiveRun>();
  /** Runs that answered and are storing how they ended. */
  private finishing = new Map<string, Promise<void>>();
  /** Trace writes still in flight, so an annotation right after a run finds its trace. */
  readonly pendingTraces = new Map<string, Promise<void>>();

  constructor(
    private ctx: Context,
    private versions: VersionsService,
    private prompts: PromptsService,
    private providers: ProviderResolver,
    private bus: RunEventBus,
  ) {}

  /** Starts a run of a document: executing now (streamed or not), or queued for any process (background). */
  async run(principal: Principal, projectId: string, versionUuid: string, body: RunBody): Promise<{ background: true; uuid: string } | { background: false; run: ActiveRun }> {
    const version = await this.versions.resolve(this.ctx.sql, principal.organizationId, projectId, versionUuid);
    const document = await this.prompts.find(this.ctx.sql, version, String(body.path ?? ""));
    const clientTools = this.clientTools(body);
    if (clientTools.length && body.background) throw badRequest("tools: client tools need a streamed run and cannot run in the background");
    const metadata = await compileMetadata(document.content);
    if (metadata.errors.length) throw compileError(document.path, metadata.errors, 422);
    let messages: PromptlMessage[];
    try {
      messages = normalizeMessages(body.messages);
    } catch (error) {
      throw badRequest((error as Error).message);
    }
    if (typeof body.userMessage === "string" && body.userMessage) messages.push({ role: "user", content: [{ type: "text", text: body.userMessage }] });
    const plan: RunPlan = { kind: "run", content: document.content, parameters: body.parameters ?? {}, messages, clientTools };
    const row: ConversationRow = {
      uuid: crypto.randomUUID(),
      organization_id: principal.organizationId,
      project_id: version.project.id,
      version_uuid: version.uuid,
      document_uuid: document.document_uuid,
      path: document.path,
      api_key_id: principal.apiKeyId,
      custom_identifier: body.customIdentifier ?? null,
      trace_id: newTraceId(),
      config: metadata.config,
      messages: [],
      request: body.background ? plan : null,
      status: body.background ? "queued" : "running",
      final_event: null,
    };
    const stored = this.ctx.sql`
      INSERT INTO gateway_conversations (uuid, organization_id, project_id, version_uuid, document_uuid, path, api_key_id, custom_identifier, trace_id, config, request, status)
      VALUES (${row.uuid}, ${row.organization_id}, ${row.project_id}, ${row.version_uuid}, ${row.document_uuid}, ${row.path}, ${row.api_key_id},
        ${row.custom_identifier}, ${row.trace_id}, ${this.ctx.sql.json(row.config as never)}, ${row.request ? this.ctx.sql.json(row.request as never) : null}, ${row.status})`.then(() => {});
    if (body.background) {
      await stored;
      await this.ctx.boss.send(BACKGROUND_QUEUE, { uuid: row.uuid });
      return { background: true, uuid: row.uuid };
    }
    // The provider call starts while the conversation is being stored: the run does not wait for the commit.
    stored.catch((error) => this.ctx.log.error("storing a gateway conversation failed", { conversationUuid: row.uuid, error: error as Error }));
    return { background: false, run: this.begin(row, plan, stored) };
  }

  /** Continues a conversation with new messages. */
  async chat(principal: Principal, conversationUuid: string, body: { messages?: unknown[]; tools?: string[] }): Promise<ActiveRun> {
    let messages: PromptlMessage[];
    try {
      messages = normalizeMessages(body.messages);
    } catch (error) {
      throw badRequest((error as Error).message);
    }
    await this.finished(conversationUuid);
    const existing = await this.conversation(principal.organizationId, conversationUuid);
    const [row] = await this.ctx.sql<ConversationRow[]>`
      UPDATE gateway_conversations SET status = 'running', trace_id = ${newTraceId()}, final_event = NULL, updated_at = now()
      WHERE uuid = ${existing.uuid} AND status NOT IN ('running', 'queued') RETURNING *`;
    if (!row) throw conflict("The conversation has a run in progress");
    await this.ctx.sql`DELETE FROM gateway_run_events WHERE conversation_uuid = ${row.uuid}`;
    const plan: RunPlan = { kind: "chat", content: "", parameters: {}, messages: [...row.messages, ...messages], clientTools: this.clientTools(body) };
    return this.begin(row, plan, Promise.resolve());
  }

  /** Waits until a run of this process that just answered has stored its conversation. */
  async finished(conversationUuid: string): Promise<void> {
    await this.finishing.get(conversationUuid);
  }

  async conversation(organizationId: string, conversationUuid: string): Promise<ConversationRow> {
    if (!/^[0-9a-f-]{36}$/i.test(conversationUuid)) throw notFound("Conversation");
    const [row] = await this.ctx.sql<ConversationRow[]>`SELECT * FROM gateway_conversations WHERE uuid = ${conversationUuid} AND organization_id = ${organizationId}`;
    if (!row) throw notFound("Conversation");
    return row;
  }

  /** Executes a queued background run; a run stopped or taken meanwhile is skipped. */
  async executeQueued(conversationUuid: string): Promise<void> {
    const [row] = await this.ctx.sql<ConversationRow[]>`
      UPDATE gateway_conversations SET status = 'running', updated_at = now() WHERE uuid = ${conversationUuid} AND status = 'queued' RETURNING *`;
    if (!row?.request) return;
    await this.begin(row, row.request, Promise.resolve()).settled;
  }

  /** Stops a run in progress, in whichever process runs it; 404 when none is. */
  async stop(organizationId: string, conversationUuid: string): Promise<void> {
    const row = await this.conversation(organizationId, conversationUuid);
    if (row.status === "queued") {
      const [stopped] = await this.ctx.sql`
        UPDATE gateway_conversations SET status = 'stopped', updated_at = now() WHERE uuid = ${row.uuid} AND status = 'queued' RETURNING uuid`;
      if (stopped) return;
    }
    if (row.status !== "running" && row.status !== "queued") throw notFound("Active run");
    await this.bus.requestStop(row.uuid);
  }

  /** The events of a run in progress (or just ended), from any process. */
  async attach(organizationId: string, conversationUuid: string, signal: AbortSignal): Promise<AsyncGenerator<RunEvent>> {
    const row = await this.conversation(organizationId, conversationUuid);
    if (row.status !== "running" && row.status !== "queued" && !row.final_event) throw notFound("Active run");
    const isActive = async () => {
      const [current] = await this.ctx.sql<{ status: string }[]>`SELECT status FROM gateway_conversations WHERE uuid = ${row.uuid}`;
      return current?.status === "running" || current?.status === "queued";
    };
    return this.bus.follow(row.uuid, signal, isActive);
  }

  private clientTools(body: { tools?: unknown }): string[] {
    if (body.tools === undefined || body.tools === null) return [];
    if (!Array.isArray(body.tools) || body.tools.some((name) => typeof name !== "string")) throw badRequest("tools: must be an array of tool names");
    return body.tools as string[];
  }

  private begin(row: ConversationRow, plan: RunPlan, stored: Promise<void>): ActiveRun {
    const writer = this.bus.writer(row.uuid, stored);
    const run = new ActiveRun(row, (event) => writer.push(event));
    this.active.set(row.uuid, run);
    const unregister = this.bus.onStop(row.uuid, () => run.controller.abort(new Error("stopped")));
    run.result = (async () => {
      try {
        return await this.execute(run, plan, stored);
      } finally {
        unregister();
        this.active.delete(row.uuid);
      }
    })();
    // Stored events serve followers; the run's own answer does not wait for them.
    run.settled = run.result.then(() => Promise.all([writer.flushed(), this.finishing.get(row.uuid)])).then(() => {});
    return run;
  }

  private async execute(run: ActiveRun, plan: RunPlan, stored: Promise<void>): Promise<FinalBody | GatewayError> {
    const row = run.row;
    const startNs = nowNs();
    const completions: CompletionSpan[] = [];
    const tools: ToolSpan[] = [];
    let total = emptyUsage();
    let last: RunResponse | null = null;
    let failure: GatewayError | null = null;
    let inputMessages: PromptlMessage[] = [];
    const signal = run.controller.signal;

    /** One provider call, and the client tools it asks for, until the model answers without them. */
    const complete = async (config: Record<string, unknown>) => {
      for (;;) {
        const response = await this.completion(run, config, completions, signal);
        total = addUsage(total, response.usage);
        last = response;
        const calls = response.toolCalls;
        if (!calls.length || !calls.every((call) => plan.clientTools.includes(call.name))) return;
        run.latitude("tools-started", { tools: calls });
        for (const call of calls) {
          const toolStart = nowNs();
          const { result, isError } = await this.bus.waitForToolResult(row.organization_id, call.id, signal, toolResultTimeoutMs);
          run.conversation = [...run.conversation, toolMessage(call, result, isError)];
          tools.push({ spanId: newSpanId(), startNs: toolStart, endNs: nowNs(), call, result, isError });
          run.latitude("tool-completed");
        }
      }
    };

    try {
      run.latitude("chain-started");
      if (plan.kind === "chat") {
        run.conversation = plan.messages;
        inputMessages = plan.messages.slice(row.messages.length);
        run.latitude("step-started");
        await complete(row.config);
        run.latitude("step-completed");
      } else {
        const chain = new Chain({ prompt: plan.content, parameters: plan.parameters });
        let step = await chain.step();
        let first = true;
        while (!step.completed) {
          const compiled = normalizeMessages(step.messages);
          const before = first ? [...compiled, ...plan.messages] : compiled;
          if (first) inputMessages = before;
          first = false;
          run.conversation = before;
          run.latitude("step-started");
          await complete(step.config);
          run.latitude("step-completed");
          const pending = (last as RunResponse | null)?.toolCalls.some((call) => !plan.clientTools.includes(call.name));
          if (pending) break;
          step = await chain.step(run.conversation.slice(before.length) as never);
        }
      }
      const response = last as RunResponse | null;
      if (!response) throw runError("document_config_error", "The prompt has no step to run", 422);
      const pendingCalls = response.toolCalls.filter((call) => !plan.clientTools.includes(call.name));
      if (pendingCalls.length) run.latitude("tools-requested", { tools: pendingCalls });
      const final: FinalBody = { uuid: run.uuid, conversation: run.conversation, response, source: run.source };
      run.latitude("chain-completed", { response, toolCalls: response.toolCalls, tokenUsage: total, finishReason: completions.at(-1)?.finishReason ?? "stop" });
      this.finish(run, stored, "finished", final);
      return final;
    } catch (error) {
      failure = classify(error, signal);
      run.latitude("chain-error", { error: failure.body() });
      this.finish(run, stored, failure.errorCode === "abort_error" ? "stopped" : "failed", null);
      return failure;
    } finally {
      this.trace(run, plan, { startNs, completions, tools, input: inputMessages, error: failure?.message ?? null });
    }
  }

  /**
   * Stores how the run ended, after its answer went out; chats and reads in this process wait for it
   * (`finished`), other processes see the run active until then.
   */
  private finish(run: ActiveRun, stored: Promise<void>, status: "finished" | "failed" | "stopped", final: FinalBody | null) {
    const done = stored
      .then(async () => {
        await this.ctx.sql`
          UPDATE gateway_conversations SET status = ${status}, messages = ${this.ctx.sql.json(run.conversation as never)},
            final_event = ${final ? this.ctx.sql.json(final as never) : null}, updated_at = now()
          WHERE uuid = ${run.uuid}`;
      })
      .catch((error) => this.ctx.log.error("recording the end of a gateway run failed", { conversationUuid: run.uuid, error: error as Error }))
      .finally(() => this.finishing.delete(run.uuid));
    this.finishing.set(run.uuid, done);
  }

  /** One provider call through the AI SDK, its stream forwarded as provider events. */
  private async completion(run: ActiveRun, config: Record<string, unknown>, completions: CompletionSpan[], signal: AbortSignal): Promise<RunResponse> {
    const providerName = String(config.provider ?? "");
    const modelId = String(config.model ?? "");
    const resolved = this.providers.resolve(providerName, modelId);
    const input = run.conversation;
    run.latitude("provider-started", { config });
    const span: CompletionSpan = {
      spanId: newSpanId(),
      startNs: nowNs(),
      endNs: 0n,
      provider: resolved.system,
      model: modelId,
      responseModel: "",
      input,
      output: [],
      usage: emptyUsage(),
      finishReason: "",
      streaming: true,
      firstTokenNs: null,
      error: null,
    };
    completions.push(span);
    const schema = config.schema && typeof config.schema === "object" ? config.schema : null;
    let text = "";
    const toolCalls: ToolCall[] = [];
    try {
      const result = streamText({
        model: resolved.model,
        messages: toModelMessages(input),
        tools: toolSet(config.tools),
        abortSignal: signal,
        maxRetries: 0,
        allowSystemInMessages: true,
        temperature: numberOr(config.temperature),
        maxOutputTokens: numberOr(config.maxTokens) ?? numberOr(config.max_tokens),
        topP: numberOr(config.topP),
        ...(schema ? { output: Output.object({ schema: jsonSchema(schema as never) }) } : {}),
      });
      for await (const part of result.fullStream) {
        switch (part.type) {
          case "text-delta":
            span.firstTokenNs ??= nowNs();
            text += part.text;
            run.emit("provider-event", { type: "text-delta", textDelta: part.text });
            break;
          case "tool-call":
            span.firstTokenNs ??= nowNs();
            toolCalls.push({ id: part.toolCallId, name: part.toolName, arguments: (part.input ?? {}) as Record<string, unknown> });
            run.emit("provider-event", { type: "tool-call", toolCallId: part.toolCallId, toolName: part.toolName, args: part.input });
            break;
          case "finish-step":
            span.responseModel = part.response.modelId ?? "";
            break;
          case "finish":
            span.usage = toUsage(part.totalUsage);
            span.finishReason = part.finishReason;
            run.emit("provider-event", {
              type: "finish",
              finishReason: part.finishReason,
              usage: { promptTokens: span.usage.promptTokens, completionTokens: span.usage.completionTokens, totalTokens: span.usage.totalTokens },
            });
            break;
          case "error":
            throw part.error;
          case "abort":
            throw signal.reason ?? new Error("aborted");
        }
      }
      if (signal.aborted) throw signal.reason;
    } catch (error) {
      span.endNs = nowNs();
      span.error = (error as Error)?.message ?? String(error);
      throw error;
    }
    span.endNs = nowNs();
    const assistant = assistantMessage(text, toolCalls);
    span.output = [assistant];
    run.conversation = [...input, assistant];
    let object: unknown;
    if (schema) {
      try {
        object = JSON.parse(text);
      } catch {
        throw runError("ai_run_error", "The provider's answer is not the JSON the prompt's schema asks for", 422);
      }
    }
    const response: RunResponse = {
      streamType: schema ? "object" : "text",
      text,
      ...(schema ? { object } : {}),
      usage: span.usage,
      toolCalls,
      cost: costOf(resolved.system, span.responseModel || modelId, span.usage),
      input,
      output: [assistant],
      model: modelId,
      provider: resolved.kind,
      documentLogUuid: run.uuid,
    };
    run.latitude("provider-completed", { tokenUsage: span.usage, finishReason: span.finishReason, response });
    return response;
  }

  /** Records the run's trace in the background; `pendingTraces` lets readers wait for it. */
  private trace(run: ActiveRun, plan: RunPlan, parts: Pick<RunTraceRecord, "startNs" | "completions" | "tools" | "input" | "error">) {
    const row = run.row;
    const record: RunTraceRecord = {
      ...parts,
      traceId: row.trace_id,
      rootSpanId: newSpanId(),
      endNs: nowNs(),
      projectId: row.project_id,
      conversationUuid: row.uuid,
      documentPath: row.path,
      documentUuid: row.document_uuid,
      versionUuid: row.version_uuid,
      customIdentifier: row.custom_identifier,
      operation: plan.kind,
      output: run.conversation.slice(parts.input.length + (plan.kind === "chat" ? row.messages.length : 0)),
    };
    const pending = recordRunTrace(this.ctx.ingest, { organizationId: row.organization_id, apiKeyId: row.api_key_id ?? "" }, record)
      .catch((error) => this.ctx.log.error("recording a gateway run's trace failed", { conversationUuid: row.uuid, error: error as Error }))
      .finally(() => this.pendingTraces.delete(row.uuid));
    this.pendingTraces.set(row.uuid, pending);
  }

  /** Waits for a stored run's trace when this process is still writing it. */
  async traceWritten(conversationUuid: string) {
    await this.pendingTraces.get(conversationUuid);
  }
}

