import { Elysia, t } from "elysia";
import type { Context } from "../../context";
import { rejectUndeclaredProperties } from "../../lib/validation";
import { authGuard } from "../auth";
import { findProject } from "../projects/service";
import { ProjectParams } from "../projects/model";
import { EmbeddingsClient } from "../traces/embeddings";
import { PaginatedTraces, type ListTracesBody } from "../traces/model";
import { TraceSearch } from "../traces/search";
import { TracesService } from "../traces/service";
import { CreateSavedSearchBody, PaginatedSavedSearches, SavedSearch, SearchParams, SearchTracesQuery, UpdateSavedSearchBody } from "./model";
import { SavedSearches } from "./service";

/** Saved searches under `/v1/projects/{projectSlug}/searches`, and the traces each one finds. */
export const searchesModule = (ctx: Context) => {
  const searches = new SavedSearches(ctx.sql);
  const traces = new TracesService(ctx.ch, new TraceSearch(ctx.config.embeddings ? new EmbeddingsClient(ctx.config.embeddings) : null, ctx.log));
  const projectOf = (organizationId: string, slug: string) => findProject(ctx.sql, organizationId, slug);
  const prefix = "/v1/projects/:projectSlug/searches";
  return new Elysia({ name: "searches", detail: { tags: ["saved searches"] } })
    .use(authGuard(ctx.auth))
    .get(prefix, async ({ principal, params }) => ({ items: await searches.list(await projectOf(principal.organizationId, params.projectSlug)), nextCursor: null, hasMore: false }), {
      params: ProjectParams,
      response: PaginatedSavedSearches,
      detail: { summary: "List saved searches", description: "Every active saved search of the project, oldest first, in one page." },
    })
    .post(
      prefix,
      async ({ principal, params, body, status }) => status(201, await searches.create(await projectOf(principal.organizationId, params.projectSlug), body)),
      {
        params: ProjectParams,
        body: CreateSavedSearchBody,
        transform: rejectUndeclaredProperties(CreateSavedSearchBody),
        response: { 201: SavedSearch },
        detail: { summary: "Create a saved search", description: "At least one of `query` or `filters`; the slug is derived from the name." },
      },
    )
    .get(`${prefix}/:searchSlug`, async ({ principal, params }) => searches.get(await projectOf(principal.organizationId, params.projectSlug), params.searchSlug), {
      params: SearchParams,
      response: SavedSearch,
      detail: { summary: "Get a saved search" },
    })
    .patch(
      `${prefix}/:searchSlug`,
      async ({ principal, params, body }) => searches.update(await projectOf(principal.organizationId, params.projectSlug), params.searchSlug, body),
      {
        params: SearchParams,
        body: UpdateSavedSearchBody,
        transform: rejectUndeclaredProperties(UpdateSavedSearchBody),
        response: SavedSearch,
        detail: { summary: "Update a saved search", description: "A rename regenerates the slug when its slug form changes (not for capitalization)." },
      },
    )
    .delete(
      `${prefix}/:searchSlug`,
      async ({ principal, params, status }) => {
        await searches.remove(await projectOf(principal.organizationId, params.projectSlug), params.searchSlug);
        return status(204, undefined);
      },
      { params: SearchParams, response: { 204: t.Void() }, detail: { summary: "Delete a saved search" } },
    )
    .get(
      `${prefix}/:searchSlug/traces`,
      async ({ principal, params, query }) => {
        const project = await projectOf(principal.organizationId, params.projectSlug);
        const search = await searches.get(project, params.searchSlug);
        return traces.list(project, { ...(query as Omit<ListTracesBody, "query" | "filters">), query: search.query ?? undefined, filters: search.filters });
      },
      {
        params: SearchParams,
        query: SearchTracesQuery,
        response: PaginatedTraces,
        detail: { summary: "Traces of a saved search", description: "The trace list with the search's query and filters, cursor-paginated." },
      },
    );
};
