import { Elysia, t } from "elysia";
import type { Context } from "../../context";
import { PageQuery } from "../../lib/pagination";
import { rejectUndeclaredProperties } from "../../lib/validation";
import { authGuard } from "../auth";
import {
  CreateProjectBody,
  OrganizationParams,
  OrganizationProjectParams,
  OrganizationRedaction,
  PaginatedProjects,
  Project,
  ProjectParams,
  UpdateProjectBody,
} from "./model";
import { organizationFromPath, ProjectsService } from "./service";

const create = {
  body: CreateProjectBody,
  transform: rejectUndeclaredProperties(CreateProjectBody),
  response: { 201: Project },
  detail: { summary: "Create a project", description: "The name must be unique among the organization's active projects (409 otherwise)." },
};
const list = {
  query: PageQuery,
  response: PaginatedProjects,
  detail: { summary: "List active projects", description: "Oldest first; pass `nextCursor` back as `cursor` for the next page." },
};
const get = { response: Project, detail: { summary: "Get a project" } };
const update = {
  body: UpdateProjectBody,
  transform: rejectUndeclaredProperties(UpdateProjectBody),
  response: Project,
  detail: {
    summary: "Update a project",
    description: "`name` renames (the slug never changes); `settings` is a patch whose nested objects merge; `flaggers` switches the flaggers sent.",
  },
};
const remove = { response: { 204: t.Void() }, detail: { summary: "Delete a project", description: "Soft delete; the name becomes free again." } };

/** Projects of the credential's organization, under `/v1/projects` and the spec's organization-scoped paths. */
export const projectsModule = ({ sql, auth, redaction, ingest }: Context) => {
  const projects = new ProjectsService(sql, { redaction, ingest });
  return new Elysia({ name: "projects", detail: { tags: ["projects"] } })
    .use(authGuard(auth))
    .post("/v1/projects", async ({ principal, body, status }) => status(201, await projects.create(principal.organizationId, body.name)), create)
    .get("/v1/projects", ({ principal, query }) => projects.list(principal.organizationId, query), list)
    .get("/v1/projects/:projectSlug", ({ principal, params }) => projects.get(principal.organizationId, params.projectSlug), {
      ...get,
      params: ProjectParams,
    })
    .patch("/v1/projects/:projectSlug", ({ principal, params, body }) => projects.update(principal.organizationId, params.projectSlug, body), {
      ...update,
      params: ProjectParams,
    })
    .delete(
      "/v1/projects/:projectSlug",
      async ({ principal, params, status }) => {
        await projects.remove(principal.organizationId, params.projectSlug);
        return status(204, undefined);
      },
      { ...remove, params: ProjectParams },
    )
    .post(
      "/v1/organizations/:organizationId/projects",
      async ({ principal, params, body, status }) => status(201, await projects.create(organizationFromPath(principal, params.organizationId), body.name)),
      { ...create, params: OrganizationParams },
    )
    .get(
      "/v1/organizations/:organizationId/projects",
      ({ principal, params, query }) => projects.list(organizationFromPath(principal, params.organizationId), query),
      { ...list, params: OrganizationParams },
    )
    .get(
      "/v1/organizations/:organizationId/projects/:projectId",
      ({ principal, params }) => projects.get(organizationFromPath(principal, params.organizationId), params.projectId),
      { ...get, params: OrganizationProjectParams },
    )
    .patch(
      "/v1/organizations/:organizationId/projects/:projectId",
      ({ principal, params, body }) => projects.update(organizationFromPath(principal, params.organizationId), params.projectId, body),
      { ...update, params: OrganizationProjectParams },
    )
    .delete(
      "/v1/organizations/:organizationId/projects/:projectId",
      async ({ principal, params, status }) => {
        await projects.remove(organizationFromPath(principal, params.organizationId), params.projectId);
        return status(204, undefined);
      },
      { ...remove, params: OrganizationProjectParams },
    )
    .get("/v1/organization/redaction", ({ principal }) => projects.organizationRedaction(principal.organizationId), {
      response: OrganizationRedaction,
      detail: { summary: "Get the organization's redaction policy" },
    })
    .put("/v1/organization/redaction", ({ principal, body }) => projects.setOrganizationRedaction(principal.organizationId, body), {
      body: OrganizationRedaction,
      transform: rejectUndeclaredProperties(OrganizationRedaction),
      response: OrganizationRedaction,
      detail: {
        summary: "Set the organization's redaction policy",
        description: "Applies to spans ingested after the change, in every project; `locked` makes project settings ignored.",
      },
    });
};
