import { Elysia, t } from "elysia";
import type { Context } from "../context";
import { authGuard } from "../modules/auth";
import { ConversationsService } from "./conversations";
import { GatewayError } from "./errors";
import { isTerminal, RunEventBus, type RunEvent } from "./events";
import { PromptsService } from "./prompts";
import { ProviderResolver } from "./providers";
import { GatewayRateLimits } from "./rate-limit";
import { BACKGROUND_QUEUE, RunsService, type ActiveRun, type RunBody } from "./runs";
import { presentVersion, VersionsService } from "./versions";

/**
 * The prompt gateway, `/api/v3`, as the official gateway client calls it: routes here, then
 * versions.ts and prompts.ts (projects, versions, documents), runs.ts (executing prompts through the
 * AI SDK), events.ts (run events across processes) and trace.ts (every run a trace in its project).
 */
export interface Gateway {
  versions: VersionsService;
  prompts: PromptsService;
  runs: RunsService;
  conversations: ConversationsService;
  bus: RunEventBus;
  limits: GatewayRateLimits;
}

const gateways = new WeakMap<Context, Gateway>();

/** The gateway's services for one running Vigil, shared by its routes and its background worker. */
export function gatewayServices(ctx: Context): Gateway {
  let gateway = gateways.get(ctx);
  if (!gateway) {
    const providers = new ProviderResolver(ctx.config.providers);
    const versions = new VersionsService(ctx.sql, ctx.ingest);
    const prompts = new PromptsService(ctx.sql, versions, providers);
    const bus = new RunEventBus(ctx.sql, ctx.log);
    const runs = new RunsService(ctx, versions, prompts, providers, bus);
    gateway = { versions, prompts, runs, bus, conversations: new ConversationsService(ctx, versions, prompts, runs), limits: new GatewayRateLimits(ctx.sql) };
    gateways.set(ctx, gateway);
  }
  return gateway;
}

/** Listens for other processes' run events and works background runs; called from src/jobs. */
export async function startGatewayWorker(ctx: Context) {
  const { bus, runs } = gatewayServices(ctx);
  await bus.start();
  ctx.onShutdown(() => bus.stop());
  await ctx.boss.createQueue(BACKGROUND_QUEUE);
  await ctx.boss.work<{ uuid: string }>(BACKGROUND_QUEUE, { pollingIntervalSeconds: 0.5, batchSize: 4 }, async (jobs) => {
    await Promise.all(jobs.map((job) => runs.executeQueued(job.data.uuid)));
  });
}

const encoder = new TextEncoder();
const frame = (event: RunEvent) => encoder.encode(`id: ${event.id}\nevent: ${event.event}\ndata: ${event.json}\n\n`);
const sseHeaders = (headers: Record<string, unknown>) => ({
  ...(Object.fromEntries(Object.entries(headers).filter(([key]) => key.toLowerCase().startsWith("x-"))) as Record<string, string>),
  "Content-Type": "text/event-stream",
  "Cache-Control": "no-cache",
  Connection: "keep-alive",
});

/** A run executing here as Server-Sent Events, each event written as it happens; a client leaving stops the run. */
function streamRun(run: ActiveRun, headers: Record<string, unknown>): Response {
  let detach: () => void = () => {};
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      const listener = (event: RunEvent) => {
        controller.enqueue(frame(event));
        if (isTerminal(event)) {
          detach();
          controller.close();
        }
      };
      detach = run.subscribe(listener);
    },
    cancel() {
      detach();
      run.controller.abort(new Error("client disconnected"));
    },
  });
  return new Response(body, { headers: sseHeaders(headers) });
}

/** Events followed from the store (attach) as Server-Sent Events; a client leaving only stops following. */
function streamFollowed(events: AsyncGenerator<RunEvent>, stop: AbortController, headers: Record<string, unknown>): Response {
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      const next = await events.next();
      if (next.done) controller.close();
      else controller.enqueue(frame(next.value));
    },
    cancel() {
      stop.abort();
    },
  });
  return new Response(body, { headers: sseHeaders(headers) });
}

async function finalBody(run: ActiveRun, request: Request) {
  const abort = () => run.controller.abort(new Error("client disconnected"));
  request.signal.addEventListener("abort", abort);
  const result = await run.result;
  request.signal.removeEventListener("abort", abort);
  if (result instanceof GatewayError) throw result;
  return result;
}

const Loose = { additionalProperties: true } as const;
const ProjectParams = t.Object({ projectId: t.String() });
const VersionParams = t.Object({ projectId: t.String(), versionUuid: t.String() });
const ConversationParams = t.Object({ conversationUuid: t.String() });
const NameBody = t.Object({ name: t.String() }, Loose);
const PathBody = t.Object({ path: t.String(), prompt: t.Optional(t.String()), force: t.Optional(t.Boolean()) }, Loose);
const SaveBody = t.Object({ path: t.String(), prompt: t.String(), force: t.Optional(t.Boolean()) }, Loose);
const PublishBody = t.Optional(t.Object({ title: t.Optional(t.String()), description: t.Optional(t.String()) }, Loose));
const PushBody = t.Object(
  { changes: t.Array(t.Object({ path: t.String(), content: t.Optional(t.String()), status: t.Union([t.Literal("added"), t.Literal("modified"), t.Literal("deleted"), t.Literal("unchanged")]) }, Loose)) },
  Loose,
);
const RunRequest = t.Object(
  {
    path: t.String(),
    parameters: t.Optional(t.Record(t.String(), t.Unknown())),
    stream: t.Optional(t.Boolean()),
    background: t.Optional(t.Boolean()),
    messages: t.Optional(t.Array(t.Unknown())),
    userMessage: t.Optional(t.String()),
    customIdentifier: t.Optional(t.Union([t.String(), t.Null()])),
    tools: t.Optional(t.Array(t.String())),
  },
  Loose,
);
const ChatRequest = t.Object({ messages: t.Array(t.Unknown()), stream: t.Optional(t.Boolean()), tools: t.Optional(t.Array(t.String())) }, Loose);
const AttachRequest = t.Optional(t.Object({ stream: t.Optional(t.Boolean()) }, Loose));
const LogRequest = t.Object({ path: t.String(), messages: t.Array(t.Unknown()), response: t.Optional(t.String()) }, Loose);
const AnnotateRequest = t.Object(
  { score: t.Number(), versionUuid: t.Optional(t.String()), metadata: t.Optional(t.Object({ reason: t.Optional(t.String()) }, Loose)) },
  Loose,
);
const ToolResultRequest = t.Object({ toolCallId: t.String({ minLength: 1, maxLength: 256 }), result: t.Optional(t.Unknown()), isError: t.Optional(t.Boolean()) }, Loose);

/** Every `/api/v3` route; rate limits and their headers apply to each, per API key by plan. */
export const gatewayModule = (ctx: Context) => {
  const { versions, prompts, runs, conversations, bus, limits } = gatewayServices(ctx);
  return new Elysia({ name: "gateway", prefix: "/api/v3", detail: { tags: ["gateway"] } })
    .use(authGuard(ctx.auth))
    .onBeforeHandle({ as: "scoped" }, async ({ principal, set }) => {
      // authGuard's derive has run: without a principal the request was a 401 already.
      const caller = principal!;
      Object.assign(set.headers, await limits.check(caller.organizationId, caller.apiKeyId ?? caller.userId ?? caller.organizationId));
    })
    .get("/projects", ({ principal }) => versions.listProjects(principal.organizationId))
    .post("/projects", async ({ principal, body, status }) => status(201, await versions.createProject(principal.organizationId, body.name, principal.userId)), { body: NameBody })
    .get("/projects/:projectId/versions", ({ principal, params }) => versions.list(principal.organizationId, params.projectId), { params: ProjectParams })
    .post("/projects/:projectId/versions", async ({ principal, params, body, status }) => status(201, await versions.create(principal.organizationId, params.projectId, body.name, principal.userId)), {
      params: ProjectParams,
      body: NameBody,
    })
    .get("/projects/:projectId/versions/:versionUuid", async ({ principal, params }) => presentVersion(await versions.resolve(ctx.sql, principal.organizationId, params.projectId, params.versionUuid)), {
      params: VersionParams,
    })
    .post("/projects/:projectId/versions/:versionUuid/publish", ({ principal, params, body }) => versions.publish(principal.organizationId, params.projectId, params.versionUuid, body ?? {}), {
      params: VersionParams,
      body: PublishBody,
    })
    .post("/projects/:projectId/versions/:versionUuid/push", ({ principal, params, body }) => prompts.push(principal.organizationId, params.projectId, params.versionUuid, body.changes, principal.userId), {
      params: VersionParams,
      body: PushBody,
    })
    .get("/projects/:projectId/versions/:versionUuid/documents", ({ principal, params }) => prompts.list(principal.organizationId, params.projectId, params.versionUuid), { params: VersionParams })
    .post("/projects/:projectId/versions/:versionUuid/documents", async ({ principal, params, body, status }) => status(201, await prompts.save(principal.organizationId, params.projectId, params.versionUuid, body, true)), {
      params: VersionParams,
      body: SaveBody,
    })
    .post("/projects/:projectId/versions/:versionUuid/documents/get-or-create", ({ principal, params, body }) => prompts.getOrCreate(principal.organizationId, params.projectId, params.versionUuid, body.path, body.prompt), {
      params: VersionParams,
      body: PathBody,
    })
    .post("/projects/:projectId/versions/:versionUuid/documents/create-or-update", ({ principal, params, body }) => prompts.save(principal.organizationId, params.projectId, params.versionUuid, body, false), {
      params: VersionParams,
      body: SaveBody,
    })
    .post("/projects/:projectId/versions/:versionUuid/documents/restore", ({ principal, params, body }) => prompts.restore(principal.organizationId, params.projectId, params.versionUuid, body.path), {
      params: VersionParams,
      body: PathBody,
    })
    .post(
      "/projects/:projectId/versions/:versionUuid/documents/run",
      async ({ principal, params, body, set, request }) => {
        const started = await runs.run(principal, params.projectId, params.versionUuid, body as RunBody);
        if (started.background) return { uuid: started.uuid };
        if (body.stream) return streamRun(started.run, set.headers);
        return finalBody(started.run, request);
      },
      { params: VersionParams, body: RunRequest },
    )
    .post("/projects/:projectId/versions/:versionUuid/documents/logs", ({ principal, params, body }) => conversations.log(principal, params.projectId, params.versionUuid, body), {
      params: VersionParams,
      body: LogRequest,
    })
    // The document path is the wildcard: it may hold slashes.
    .get("/projects/:projectId/versions/:versionUuid/documents/*", ({ principal, params }) => prompts.get(principal.organizationId, params.projectId, params.versionUuid, params["*"]))
    .delete(
      "/projects/:projectId/versions/:versionUuid/documents/*",
      async ({ principal, params }) => {
        await prompts.remove(principal.organizationId, params.projectId, params.versionUuid, params["*"]);
        return { deleted: true };
      },
    )
    .get("/conversations/:conversationUuid", ({ principal, params }) => conversations.get(principal, params.conversationUuid), { params: ConversationParams })
    .post(
      "/conversations/:conversationUuid/chat",
      async ({ principal, params, body, set, request }) => {
        const run = await runs.chat(principal, params.conversationUuid, body);
        return body.stream ? streamRun(run, set.headers) : finalBody(run, request);
      },
      { params: ConversationParams, body: ChatRequest },
    )
    .post(
      "/conversations/:conversationUuid/attach",
      async ({ principal, params, body, set, request }) => {
        const stop = new AbortController();
        const events = await runs.attach(principal.organizationId, params.conversationUuid, stop.signal);
        if (body?.stream) return streamFollowed(events, stop, set.headers);
        request.signal.addEventListener("abort", () => stop.abort());
        let last: RunEvent | null = null;
        for await (const event of events) last = event;
        if (last?.data.type === "chain-error") {
          const error = last.data.error as { name: string; errorCode: string; message: string };
          throw new GatewayError(422, error.name, error.errorCode, error.message);
        }
        if (last?.data.type !== "chain-completed") throw new GatewayError(422, "DocumentRunError", "unknown_error", "The run ended without a response");
        // The final body, as the run's own caller received it.
        const { uuid, messages, response, source } = last.data;
        return { uuid, conversation: messages, response, source };
      },
      { params: ConversationParams, body: AttachRequest },
    )
    .post(
      "/conversations/:conversationUuid/stop",
      async ({ principal, params }) => {
        await runs.stop(principal.organizationId, params.conversationUuid);
        return new Response(null, { status: 200 });
      },
      { params: ConversationParams },
    )
    .post(
      "/conversations/:conversationUuid/evaluations/:evaluationUuid/annotate",
      async ({ principal, params, body, status }) => status(202, await conversations.annotate(principal, params.conversationUuid, params.evaluationUuid, body)),
      { params: t.Object({ conversationUuid: t.String(), evaluationUuid: t.String() }), body: AnnotateRequest },
    )
    .post(
      "/tools/results",
      async ({ principal, body }) => {
        await bus.postToolResult(principal.organizationId, body.toolCallId, body.result, body.isError === true);
        return { ok: true };
      },
      { body: ToolResultRequest },
    );
};
