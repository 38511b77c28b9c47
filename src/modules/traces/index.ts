import { Elysia } from "elysia";
import type { Context } from "../../context";
import { createMailer } from "../../lib/mailer";
import { RateLimiter } from "../../lib/rate-limit";
import { EmailConfirmations } from "../email-confirmations/service";
import { authGuard } from "../auth";
import type { Principal } from "../auth/service";
import { findProject, organizationFromPath } from "../projects/service";
import { EmbeddingsClient, startEmbeddingIndexer } from "./embeddings";
import { TraceExports } from "./export";
import { MemoryService } from "./memory";
import {
  AnalyticsQuery,
  ExportDownloadQuery,
  ExportParams,
  ExportTracesBody,
  ExportTracesResponse,
  ListTracesBody,
  MemoryQuery,
  PaginatedTraces,
  SessionMemoryChanges,
  SessionMemorySummary,
  SessionParams,
  SpanDetail,
  SpanParams,
  TraceAnalyticsResponse,
  TraceDetail,
  TraceParams,
  TraceSpans,
} from "./model";
import { TraceSearch } from "./search";
import { TracesService, type ProjectRef } from "./service";

type ProjectOf = (principal: Principal, params: Record<string, string>) => Promise<ProjectRef>;

/**
 * Reading what was ingested: trace list (filters, sorts, search), analytics, detail, spans, memory,
 * CSV export. Served under `/v1/projects/{projectSlug}` and the spec's organization-scoped path.
 */
export const tracesModule = (ctx: Context) => {
  const embeddings = ctx.config.embeddings ? new EmbeddingsClient(ctx.config.embeddings) : null;
  const search = new TraceSearch(embeddings, ctx.log);
  const traces = new TracesService(ctx.ch, search);
  const memory = new MemoryService(ctx.ch);
  const mailer = createMailer(ctx.config, ctx.log);
  const confirmations = new EmailConfirmations(ctx.sql, mailer, ctx.config);
  const exports = new TraceExports(ctx.sql, traces, mailer, ctx.config, ctx.log, confirmations, new RateLimiter(ctx.sql));
  exports.start();
  const indexer = embeddings ? startEmbeddingIndexer(ctx, embeddings) : null;
  ctx.onShutdown(async () => {
    await indexer?.stop();
    await exports.stop();
    await mailer.drain();
  });
  ctx.log.info("trace search mode", { mode: search.mode });

  const projectRoutes = (prefix: string, projectOf: ProjectOf) =>
    new Elysia()
      .use(authGuard(ctx.auth))
      .post(`${prefix}/traces/list`, async ({ principal, params, body }) => traces.list(await projectOf(principal, params), body), {
        body: ListTracesBody,
        response: PaginatedTraces,
        detail: {
          summary: "List traces",
          description:
            "Cursor-paginated traces matching `filters` and `query` (search over input and output messages). A walk with `nextCursor` reads the traces as they were at its first page: none repeats or is skipped while spans keep arriving.",
        },
      })
      .get(
        `${prefix}/traces/analytics`,
        async ({ principal, params, query }) => traces.analytics(await projectOf(principal, params), query.fromIso, query.toIso),
        {
          query: AnalyticsQuery,
          response: TraceAnalyticsResponse,
          detail: { summary: "Trace analytics", description: "Totals or medians over the range (default: the last 7 days) and per 12-hour UTC bucket." },
        },
      )
      .post(
        `${prefix}/traces/export`,
        async ({ principal, params, body, status }) => status(202, await exports.request(await projectOf(principal, params), body)),
        {
          body: ExportTracesBody,
          response: { 202: ExportTracesResponse },
          detail: {
            summary: "Export traces as CSV",
            description:
              "Queues a CSV of the traces (one row per trace); the recipient, a member of the organization, gets an expiring download link by email. " +
              "An address that has not confirmed it receives Vigil's mail gets a confirmation link instead, and the request is a 403 until it is confirmed. " +
              "Rate limited per organization (EXPORT_RATE_LIMIT per hour; 429 with `Retry-After`).",
          },
        },
      )
      .get(`${prefix}/traces/:traceId`, async ({ principal, params }) => traces.get(await projectOf(principal, params), params.traceId), {
        params: TraceParams,
        response: TraceDetail,
        detail: { summary: "Get a trace", description: "Every Trace field, its metadata and its conversation." },
      })
      .get(`${prefix}/traces/:traceId/spans`, async ({ principal, params }) => traces.spans(await projectOf(principal, params), params.traceId), {
        params: TraceParams,
        response: TraceSpans,
        detail: { summary: "List a trace's spans", description: "By start time, without message content." },
      })
      .get(
        `${prefix}/traces/:traceId/spans/:spanId`,
        async ({ principal, params }) => traces.span(await projectOf(principal, params), params.traceId, params.spanId),
        { params: SpanParams, response: SpanDetail, detail: { summary: "Get a span", description: "Every field, messages and attributes included." } },
      )
      .get(
        `${prefix}/traces/:traceId/memory`,
        async ({ principal, params }) => memory.summary(await projectOf(principal, params), { kind: "trace", traceId: params.traceId }),
        { params: TraceParams, response: SessionMemorySummary, detail: { summary: "Memory footprint of a trace" } },
      )
      .get(
        `${prefix}/traces/:traceId/memory/changes`,
        async ({ principal, params }) => memory.changes(await projectOf(principal, params), { kind: "trace", traceId: params.traceId }),
        { params: TraceParams, response: SessionMemoryChanges, detail: { summary: "Memory changes of a trace" } },
      )
      .get(
        `${prefix}/sessions/:sessionId/memory`,
        async ({ principal, params, query }) =>
          memory.summary(await projectOf(principal, params), { kind: "session", sessionId: params.sessionId, traceId: query.traceId }),
        { params: SessionParams, query: MemoryQuery, response: SessionMemorySummary, detail: { summary: "Memory footprint of a session" } },
      )
      .get(
        `${prefix}/sessions/:sessionId/memory/changes`,
        async ({ principal, params, query }) =>
          memory.changes(await projectOf(principal, params), { kind: "session", sessionId: params.sessionId, traceId: query.traceId }),
        { params: SessionParams, query: MemoryQuery, response: SessionMemoryChanges, detail: { summary: "Memory changes of a session" } },
      );

  return new Elysia({ name: "traces", detail: { tags: ["traces"] } })
    .use(projectRoutes("/v1/projects/:projectSlug", (principal, params) => findProject(ctx.sql, principal.organizationId, params.projectSlug)))
    .use(
      projectRoutes("/v1/organizations/:organizationId/projects/:projectId", (principal, params) =>
        findProject(ctx.sql, organizationFromPath(principal, params.organizationId), params.projectId),
      ),
    )
    .get(
      "/v1/exports/:exportId",
      async ({ params, query, set }) => {
        const file = await exports.download(params.exportId, query.token);
        set.headers["content-type"] = "text/csv; charset=utf-8";
        set.headers["content-disposition"] = `attachment; filename="${file.fileName}"`;
        set.headers["cache-control"] = "no-store";
        return Bun.file(file.path);
      },
      {
        params: ExportParams,
        query: ExportDownloadQuery,
        detail: { summary: "Download a trace export", description: "The link emailed to the recipient; no credentials besides its token." },
      },
    );
};
