import { Elysia, ValidationError } from "elysia";
import { Value } from "@sinclair/typebox/value";
import type { Context } from "../../context";
import { checkStoredJson, textLimits } from "../../lib/validation";
import { authGuard } from "../auth";
import { findProject, organizationFromPath } from "../projects/service";
import { CreateScoreBody, CustomScoreBody, FlatScoreBody, OrganizationProjectParams, ProjectParams, Score } from "./model";
import "./filters";
import { ScoresService } from "./service";
import { checkTraceRefShape } from "./trace-ref";

/** Validates against the body form that was sent, so a 400 names the field instead of "union". */
function validateScoreBody({ body }: { body: unknown }) {
  if (typeof body === "object" && body !== null && "trace" in body) checkTraceRefShape(body.trace);
  const flat = typeof body === "object" && body !== null && !("trace" in body) && "traceId" in body;
  const schema = flat ? FlatScoreBody : CustomScoreBody;
  if (!Value.Check(schema, body)) throw new ValidationError("body", schema, body);
  checkStoredJson("metadata", (body as { metadata?: unknown }).metadata, textLimits.metadataBytes);
}

const create = {
  body: CreateScoreBody,
  transform: validateScoreBody,
  response: { 201: Score },
  detail: {
    summary: "Create a custom score",
    description:
      "Attach a score to a trace, by `trace` (TraceRef: id, or filters matching exactly one trace) or by the flat form's `traceId`. " +
      "`spanId` must be a span of the trace and defaults to its last LLM-completion span; `sessionId` defaults to the trace's session " +
      "(null when that is longer than 128 characters). `_evaluation: true` is internal and rejected in both body forms.",
  },
};

/** Custom scores, under `/v1/projects/{projectSlug}` and the spec's organization-scoped path. */
export const scoresModule = (ctx: Context) => {
  const scores = new ScoresService(ctx);
  return new Elysia({ name: "scores", detail: { tags: ["scores"] } })
    .use(authGuard(ctx.auth))
    .post(
      "/v1/projects/:projectSlug/scores",
      async ({ principal, params, body, status }) => {
        const project = await findProject(ctx.sql, principal.organizationId, params.projectSlug);
        return status(201, await scores.createCustom(principal, project.id, body));
      },
      { ...create, params: ProjectParams },
    )
    .post(
      "/v1/organizations/:organizationId/projects/:projectId/scores",
      async ({ principal, params, body, status }) => {
        const project = await findProject(ctx.sql, organizationFromPath(principal, params.organizationId), params.projectId);
        return status(201, await scores.createCustom(principal, project.id, body));
      },
      { ...create, params: OrganizationProjectParams },
    );
};
