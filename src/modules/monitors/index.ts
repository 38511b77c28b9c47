import { Elysia, t } from "elysia";
import type { Context } from "../../context";
import { rejectUndeclaredProperties } from "../../lib/validation";
import { authGuard } from "../auth";
import { ProjectParams } from "../projects/model";
import { findProject } from "../projects/service";
import { SavedSearches } from "../searches/service";
import {
  CreateMonitorBody,
  ForTargetBody,
  Incident,
  IncidentParams,
  ListIncidentsQuery,
  ListIncidentsResponse,
  ListMonitorIncidentsQuery,
  ListMonitorsQuery,
  Monitor,
  MonitorList,
  MonitorParams,
  PaginatedMonitorIncidents,
  PaginatedMonitors,
  UpdateMonitorBody,
  Webhook,
  WebhookBody,
} from "./model";
import { MonitorsService } from "./service";
import { Webhooks } from "./webhooks";

/** Monitors and incidents under `/v1/projects/{projectSlug}`. */
export const monitorsModule = (ctx: Context) => {
  const searches = new SavedSearches(ctx.sql);
  const monitors = new MonitorsService(ctx.sql, (project, slugOrId) => searches.get(project, slugOrId));
  const webhooks = new Webhooks(ctx.sql);
  const projectOf = (organizationId: string, slug: string) => findProject(ctx.sql, organizationId, slug);
  const prefix = "/v1/projects/:projectSlug/monitors";
  const monitorRoute = `${prefix}/:monitorSlug`;
  return new Elysia({ name: "monitors", detail: { tags: ["monitors"] } })
    .use(authGuard(ctx.auth))
    .get(prefix, async ({ principal, params, query }) => monitors.list(await projectOf(principal.organizationId, params.projectSlug), query), {
      params: ProjectParams,
      query: ListMonitorsQuery,
      response: PaginatedMonitors,
      detail: { summary: "List monitors", description: "System monitors first, then by most recent activity; `search` matches names." },
    })
    .post(prefix, async ({ principal, params, body, status }) => status(201, await monitors.create(await projectOf(principal.organizationId, params.projectSlug), body)), {
      params: ProjectParams,
      body: CreateMonitorBody,
      response: { 201: Monitor },
      detail: {
        summary: "Create a monitor",
        description:
          "One rule over a target (saved search, tool, user, session): `match` opens an incident per new matching item, `threshold` while the metric crosses its threshold, `escalating` when the seasonal detector (or threshold) holds for the window.",
      },
    })
    .post(
      `${prefix}/for-target`,
      async ({ principal, params, body }) => ({ items: await monitors.forTarget(await projectOf(principal.organizationId, params.projectSlug), body) }),
      {
        params: ProjectParams,
        body: ForTargetBody,
        transform: rejectUndeclaredProperties(ForTargetBody),
        response: MonitorList,
        detail: {
          summary: "Monitors of a target (find or create)",
          description:
            "Live monitors with this target type whose filters contain `filterSetContains`; when none and the filters name one tool, user or session (`toolName`, `userId`, `sessionId` eq), creates its monitor (escalating count, medium severity) once.",
        },
      },
    )
    .get(monitorRoute, async ({ principal, params }) => monitors.get(await projectOf(principal.organizationId, params.projectSlug), params.monitorSlug), {
      params: MonitorParams,
      response: Monitor,
      detail: { summary: "Get a monitor" },
    })
    .patch(
      monitorRoute,
      async ({ principal, params, body }) => monitors.update(await projectOf(principal.organizationId, params.projectSlug), params.monitorSlug, body),
      {
        params: MonitorParams,
        body: UpdateMonitorBody,
        transform: rejectUndeclaredProperties(UpdateMonitorBody),
        response: Monitor,
        detail: { summary: "Update a monitor", description: "Name, description and severity; 403 for system monitors." },
      },
    )
    .delete(
      monitorRoute,
      async ({ principal, params, status }) => {
        await monitors.remove(await projectOf(principal.organizationId, params.projectSlug), params.monitorSlug);
        return status(204, undefined);
      },
      { params: MonitorParams, response: { 204: t.Void() }, detail: { summary: "Delete a monitor", description: "Closes its open incidents; 403 for system monitors." } },
    )
    .get(
      `${monitorRoute}/incidents`,
      async ({ principal, params, query }) => monitors.monitorIncidents(await projectOf(principal.organizationId, params.projectSlug), params.monitorSlug, query),
      {
        params: MonitorParams,
        query: ListMonitorIncidentsQuery,
        response: PaginatedMonitorIncidents,
        detail: { summary: "Incidents of a monitor", description: "Most recent first; `notified` says whether it was mailed." },
      },
    )
    .post(
      `${monitorRoute}/mute`,
      async ({ principal, params }) => monitors.setMuted(await projectOf(principal.organizationId, params.projectSlug), params.monitorSlug, true),
      { params: MonitorParams, response: Monitor, detail: { summary: "Mute a monitor", description: "Its incidents still open, without notifications." } },
    )
    .post(
      `${monitorRoute}/unmute`,
      async ({ principal, params }) => monitors.setMuted(await projectOf(principal.organizationId, params.projectSlug), params.monitorSlug, false),
      { params: MonitorParams, response: Monitor, detail: { summary: "Unmute a monitor" } },
    )
    .get(
      "/v1/projects/:projectSlug/incidents",
      async ({ principal, params, query }) => monitors.incidents(await projectOf(principal.organizationId, params.projectSlug), query),
      {
        params: ProjectParams,
        query: ListIncidentsQuery,
        response: ListIncidentsResponse,
        detail: { summary: "List incidents", description: "Incidents overlapping [fromIso, toIso] (default the last 7 days), oldest first." },
      },
    )
    .post(
      "/v1/projects/:projectSlug/incidents/:incidentId",
      async ({ principal, params }) => monitors.resolveIncident(await projectOf(principal.organizationId, params.projectSlug), params.incidentId),
      {
        params: IncidentParams,
        response: Incident,
        detail: { summary: "Resolve an incident", description: "Closes it; a new trigger opens a new incident." },
      },
    )
    .get("/v1/projects/:projectSlug/webhook", async ({ principal, params }) => webhooks.get(await projectOf(principal.organizationId, params.projectSlug)), {
      params: ProjectParams,
      response: Webhook,
      detail: { tags: ["webhooks"], summary: "Get the incident webhook" },
    })
    .put(
      "/v1/projects/:projectSlug/webhook",
      async ({ principal, params, body }) => webhooks.set(await projectOf(principal.organizationId, params.projectSlug), body.url),
      {
        params: ProjectParams,
        body: WebhookBody,
        transform: rejectUndeclaredProperties(WebhookBody),
        response: Webhook,
        detail: {
          tags: ["webhooks"],
          summary: "Set the incident webhook",
          description:
            "Incidents are POSTed to `url` as JSON when they open and close, with `X-Vigil-Signature: sha256=<hex HMAC-SHA256 of \"<X-Vigil-Timestamp>.<body>\">` under the returned `secret` (shown only here). Setting it again replaces the secret and lifts a quarantine.",
        },
      },
    )
    .delete(
      "/v1/projects/:projectSlug/webhook",
      async ({ principal, params, status }) => {
        await webhooks.remove(await projectOf(principal.organizationId, params.projectSlug));
        return status(204, undefined);
      },
      { params: ProjectParams, response: { 204: t.Void() }, detail: { tags: ["webhooks"], summary: "Remove the incident webhook" } },
    );
};
