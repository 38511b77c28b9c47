import { Elysia, ValidationError } from "elysia";
import { openapi } from "@elysiajs/openapi";
import { docsModule, docsUi } from "./modules/docs";
import type { Context } from "./context";
import { checkAnnouncedBody } from "./lib/body-limit";
import { HttpError } from "./lib/errors";
import { checkBodyShape, describeValueError } from "./lib/validation";
import { accountModule } from "./modules/account";
import { annotationsModule } from "./modules/annotations";
import { apiKeysModule } from "./modules/api-keys";
import { emailConfirmationsModule } from "./modules/email-confirmations";
import { healthModule } from "./modules/health";
import { ingestModule } from "./ingest";
import { gatewayModule } from "./gateway";
import { gatewayErrorBody, isGatewayPath } from "./gateway/errors";
import { projectsModule } from "./modules/projects";
import { scoresModule } from "./modules/scores";
import { signalsModule } from "./modules/signals";
import { tracesModule } from "./modules/traces";
import { membersModule } from "./modules/members";
import { oauthKeysModule } from "./modules/oauth-keys";
import { webModule } from "./web";
import { oauthModule } from "./oauth";
import { mcpModule } from "./mcp";
import { completeRequestBodies, nameOperations } from "./mcp/operations";
import { createPeople } from "./web/people";
import { searchesModule } from "./modules/searches";
import { monitorsModule } from "./modules/monitors";

function validationMessage(error: ValidationError): string {
  const first = error.all[0] as ({ path?: string } & Parameters<typeof describeValueError>[0]) | undefined;
  const field = first?.path ? first.path.replace(/^\//, "").replaceAll("/", ".") : "";
  const detail = first ? describeValueError(first) : "is invalid";
  const where = error.type === "body" ? "body" : error.type;
  return field ? `${field}: ${detail}` : `Invalid ${where}: ${detail}`;
}

interface ErrorReply {
  status: number;
  message: string;
  headers?: Record<string, string>;
}

function describeError(code: string | number, error: unknown): ErrorReply | null {
  if (error instanceof HttpError) return { status: error.status, message: error.message, headers: error.headers };
  // A response that fails its schema is our bug, not the caller's: it falls through to the logged 500.
  if (code === "VALIDATION" && (error as ValidationError).type !== "response") return { status: 400, message: validationMessage(error as ValidationError) };
  if (code === "VALIDATION") return null;
  if (code === "NOT_FOUND") return { status: 404, message: "Not found" };
  if (code === "PARSE") return { status: 400, message: "Malformed request body" };
  if (code === "INVALID_COOKIE_SIGNATURE") return { status: 400, message: "Invalid cookie" };
  // PostgreSQL refuses text it cannot store (a NUL character): the caller's input, not our fault.
  if ((error as { code?: unknown }).code === "22021") return { status: 400, message: "Text fields must not contain NUL characters" };
  const status = (error as { status?: number }).status;
  if (typeof status === "number" && status >= 400 && status < 500) return { status, message: String((error as Error).message || "Bad request") };
  return null;
}

/** The request path for logs: the token in a claim link is a secret. */
const loggedPath = (request: Request) => new URL(request.url).pathname.replace(/^\/claim\/[^/]+/, "/claim/:token");

/** Every route group of Vigil, composed in one place. */
export function createApp(ctx: Context) {
  const requests = new WeakMap<Request, { id: string; start: number }>();
  const log = ctx.log;
  const people = createPeople(ctx);
  // MCP tool calls run through the whole app, which exists only once composed.
  const api = { handle: (_request: Request): Promise<Response> => Promise.reject(new Error("app not composed yet")) };
  const app = new Elysia()
    .onRequest(({ request, set }) => {
      const id = request.headers.get("x-request-id")?.slice(0, 64) || crypto.randomUUID();
      requests.set(request, { id, start: performance.now() });
      set.headers["x-request-id"] = id;
      checkAnnouncedBody(request, { apiMaxBodyBytes: ctx.config.apiMaxBodyBytes, ingestMaxBodyBytes: ctx.config.ingest.maxBodyBytes });
    })
    .onTransform({ as: "global" }, ({ body }) => checkBodyShape(body))
    .onError(({ code, error, request, set }) => {
      let reply = describeError(code, error);
      if (!reply) {
        log.error("unhandled error", { requestId: requests.get(request)?.id, path: loggedPath(request), error: error as Error });
        reply = { status: 500, message: "Internal server error" };
      }
      set.status = reply.status;
      Object.assign(set.headers, reply.headers);
      if (isGatewayPath(new URL(request.url).pathname)) return gatewayErrorBody(reply.status, reply.message, error);
      return { error: reply.message };
    })
    .onAfterResponse(({ request, set }) => {
      const meta = requests.get(request);
      log.info("request", {
        requestId: meta?.id,
        method: request.method,
        path: loggedPath(request),
        status: set.status,
        ms: meta ? Math.round((performance.now() - meta.start) * 10) / 10 : undefined,
      });
    })
    .onAfterHandle(({ request, response }) => {
      if (new URL(request.url).pathname === "/openapi.json") completeRequestBodies(response as object, app.routes);
    })
    .use(
      openapi({
        path: "/docs",
        specPath: "/openapi.json",
        documentation: { info: { title: "Vigil API", version: "1.0.0", description: "Observability for AI agents" } },
        // Otherwise a path with a dot (/.well-known/…) is taken for a static file and left out.
        exclude: { staticFile: false },
        ...docsUi,
      }),
    )
    .use(docsModule())
    .use(healthModule(ctx))
    .use(ingestModule(ctx))
    .use(accountModule(ctx))
    .use(projectsModule(ctx))
    .use(apiKeysModule(ctx))
    .use(scoresModule(ctx))
    .use(annotationsModule(ctx))
    .use(tracesModule(ctx))
    .use(emailConfirmationsModule(ctx))
    .use(membersModule(ctx))
    .use(oauthKeysModule(ctx))
    .use(webModule(ctx, people))
    .use(oauthModule(ctx, people))
    .use(gatewayModule(ctx))
    .use(signalsModule(ctx))
    .use(searchesModule(ctx))
    .use(monitorsModule(ctx))
    .use(mcpModule(ctx, (request) => api.handle(request)));
  api.handle = (request) => app.handle(request);
  nameOperations(app.routes);
  return app;
}

export type App = ReturnType<typeof createApp>;
