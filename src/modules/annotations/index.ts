import { Elysia, t } from "elysia";
import type { Context } from "../../context";
import { PageQuery, Paginated } from "../../lib/pagination";
import { authGuard } from "../auth";
import type { Principal } from "../auth/service";
import { findProject, organizationFromPath } from "../projects/service";
import { checkTraceRefShape } from "../scores/trace-ref";
import {
  Annotation,
  AnnotationParams,
  CreateAnnotationBody,
  OrganizationAnnotationParams,
  OrganizationProjectParams,
  OrganizationTraceAnnotationParams,
  OrganizationTraceParams,
  ProjectParams,
  TraceAnnotationParams,
  TraceParams,
  UpdateAnnotationBody,
} from "./model";
import { AnnotationsService } from "./service";

const create = {
  body: CreateAnnotationBody,
  transform: ({ body }: { body: unknown }) => {
    if (typeof body === "object" && body !== null && "trace" in body) checkTraceRefShape(body.trace);
  },
  response: { 201: Annotation },
  detail: {
    summary: "Create an annotation",
    description:
      "A published human annotation on the trace named by `trace` (or its alias `traceId`), optionally anchored to a message, part and " +
      "character range of the trace's conversation, given in `anchor` or as top-level fields (not both: 400). " +
      "`issueId` is an alias of `signalId`. `sourceId` is \"API\" for an API key and the user's id for a user credential.",
  },
};
const get = { response: Annotation, detail: { summary: "Get an annotation" } };
const update = { body: UpdateAnnotationBody, response: Annotation, detail: { summary: "Edit an annotation's value, verdict or feedback" } };
const remove = { response: { 204: t.Void() }, detail: { summary: "Delete an annotation" } };
const publish = { response: Annotation, detail: { summary: "Publish a drafted annotation", description: "Sets `draftedAt` to null." } };
const listByTrace = {
  query: PageQuery,
  response: Paginated(Annotation),
  detail: { summary: "List a trace's annotations", description: "Newest first, drafts included. 404 for an unknown trace." },
};

/** Annotations, under `/v1/projects/{projectSlug}` and the spec's organization-scoped path. */
export const annotationsModule = (ctx: Context) => {
  const annotations = new AnnotationsService(ctx);
  const projectOf = async (principal: Principal, projectSlug: string) => (await findProject(ctx.sql, principal.organizationId, projectSlug)).id;
  const organizationProjectOf = async (principal: Principal, params: { organizationId: string; projectId: string }) =>
    (await findProject(ctx.sql, organizationFromPath(principal, params.organizationId), params.projectId)).id;

  return new Elysia({ name: "annotations", detail: { tags: ["annotations"] } })
    .use(authGuard(ctx.auth))
    .post(
      "/v1/projects/:projectSlug/annotations",
      async ({ principal, params, body, status }) => status(201, await annotations.create(principal, await projectOf(principal, params.projectSlug), body)),
      { ...create, params: ProjectParams },
    )
    .post(
      "/v1/organizations/:organizationId/projects/:projectId/annotations",
      async ({ principal, params, body, status }) => status(201, await annotations.create(principal, await organizationProjectOf(principal, params), body)),
      { ...create, params: OrganizationProjectParams },
    )
    .get(
      "/v1/projects/:projectSlug/annotations/:annotationId",
      async ({ principal, params }) => annotations.get(await projectOf(principal, params.projectSlug), params.annotationId),
      { ...get, params: AnnotationParams },
    )
    .get(
      "/v1/organizations/:organizationId/projects/:projectId/annotations/:annotationId",
      async ({ principal, params }) => annotations.get(await organizationProjectOf(principal, params), params.annotationId),
      { ...get, params: OrganizationAnnotationParams },
    )
    .patch(
      "/v1/projects/:projectSlug/annotations/:annotationId",
      async ({ principal, params, body }) => annotations.update(await projectOf(principal, params.projectSlug), params.annotationId, body),
      { ...update, params: AnnotationParams },
    )
    .patch(
      "/v1/organizations/:organizationId/projects/:projectId/annotations/:annotationId",
      async ({ principal, params, body }) => annotations.update(await organizationProjectOf(principal, params), params.annotationId, body),
      { ...update, params: OrganizationAnnotationParams },
    )
    .delete(
      "/v1/projects/:projectSlug/annotations/:annotationId",
      async ({ principal, params, status }) => {
        await annotations.delete(await projectOf(principal, params.projectSlug), params.annotationId);
        return status(204, undefined);
      },
      { ...remove, params: AnnotationParams },
    )
    .delete(
      "/v1/organizations/:organizationId/projects/:projectId/annotations/:annotationId",
      async ({ principal, params, status }) => {
        await annotations.delete(await organizationProjectOf(principal, params), params.annotationId);
        return status(204, undefined);
      },
      { ...remove, params: OrganizationAnnotationParams },
    )
    .post(
      "/v1/projects/:projectSlug/annotations/:annotationId/publish",
      async ({ principal, params }) => annotations.publish(await projectOf(principal, params.projectSlug), params.annotationId),
      { ...publish, params: AnnotationParams },
    )
    .post(
      "/v1/organizations/:organizationId/projects/:projectId/annotations/:annotationId/publish",
      async ({ principal, params }) => annotations.publish(await organizationProjectOf(principal, params), params.annotationId),
      { ...publish, params: OrganizationAnnotationParams },
    )
    .get(
      "/v1/projects/:projectSlug/traces/:traceId/annotations",
      async ({ principal, params, query }) => annotations.listByTrace(principal.organizationId, await projectOf(principal, params.projectSlug), params.traceId, query),
      { ...listByTrace, params: TraceParams },
    )
    .get(
      "/v1/organizations/:organizationId/projects/:projectId/traces/:traceId/annotations",
      async ({ principal, params, query }) => annotations.listByTrace(principal.organizationId, await organizationProjectOf(principal, params), params.traceId, query),
      { ...listByTrace, params: OrganizationTraceParams },
    )
    .get(
      "/v1/projects/:projectSlug/traces/:traceId/annotations/:annotationId",
      async ({ principal, params }) => annotations.get(await projectOf(principal, params.projectSlug), params.annotationId, params.traceId),
      { ...get, params: TraceAnnotationParams },
    )
    .get(
      "/v1/organizations/:organizationId/projects/:projectId/traces/:traceId/annotations/:annotationId",
      async ({ principal, params }) => annotations.get(await organizationProjectOf(principal, params), params.annotationId, params.traceId),
      { ...get, params: OrganizationTraceAnnotationParams },
    );
};
