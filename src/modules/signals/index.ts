import { Elysia } from "elysia";
import type { Context } from "../../context";
import { notFound } from "../../lib/errors";
import { authGuard } from "../auth";
import type { Principal } from "../auth/service";
import { findProject } from "../projects/service";
import { PaginatedTraces } from "../traces/model";
import { createCustomSignal, monitorSignal, unmonitorSignal } from "./evaluations";
import { queueSignalsExport } from "./export";
import {
  CreateSignalBody,
  CreateSignalResponse,
  ExportBody,
  ExportResponse,
  FeedbackBody,
  FeedbackResponse,
  LifecycleBody,
  LifecycleResponse,
  LimitQuery,
  ListSignalsQuery,
  MonitorResponse,
  PageQuery,
  PaginatedSignals,
  ProjectParams,
  RangeQuery,
  ResolveBody,
  SessionParams,
  SessionSignal,
  SessionSignalParams,
  SessionSignals,
  SignalAnalytics,
  SignalDetail,
  SignalHistogram,
  SignalParams,
  UpdateSignalBody,
  UpdateSignalResponse,
  UserParams,
  UserSignals,
} from "./model";
import { SignalsService, type LifecycleAction } from "./service";

const projectOf = async (ctx: Context, principal: Principal, slug: string) => {
  const project = await findProject(ctx.sql, principal.organizationId, slug);
  return { id: project.id, organizationId: principal.organizationId };
};

const lifecycleActions: { action: LifecycleAction; summary: string }[] = [
  { action: "unresolve", summary: "Reopen resolved signals" },
  { action: "ignore", summary: "Ignore (archive) signals; ignoring also mutes" },
  { action: "unignore", summary: "Stop ignoring signals" },
  { action: "mute", summary: "Mute signals' notifications" },
  { action: "unmute", summary: "Unmute signals' notifications" },
];

/** Signals (also called issues) of a project: list, detail, custom signals, lifecycle, traces, sessions and users. */
export const signalsModule = (ctx: Context) => {
  const signals = new SignalsService(ctx);
  const base = "/v1/projects/:projectSlug";
  let app = new Elysia({ name: "signals", detail: { tags: ["signals"] } })
    .use(authGuard(ctx.auth))
    .get(`${base}/signals`, async ({ principal, params, query }) => signals.list(await projectOf(ctx, principal, params.projectSlug), query), {
      params: ProjectParams,
      query: ListSignalsQuery,
      response: PaginatedSignals,
      detail: { summary: "List signals", description: "Visible signals with occurrences in the window (default: the last 6 days) or created in it." },
    })
    .post(
      `${base}/signals`,
      async ({ principal, params, body, status }) => status(201, await createCustomSignal(ctx.sql, await projectOf(ctx, principal, params.projectSlug), body)),
      {
        params: ProjectParams,
        body: CreateSignalBody,
        response: { 201: CreateSignalResponse },
        detail: {
          summary: "Create a custom signal",
          description:
            "A signal with its detector: `evaluation.settings` of kind `rule` (deterministic conditions) or `judge` (LLM criteria), run on each finished trace matching `filters`. `evaluation.script` is refused with 400.",
        },
      },
    )
    .get(
      `${base}/signals/analytics`,
      async ({ principal, params, query }) => signals.analytics(await projectOf(ctx, principal, params.projectSlug), query.fromIso, query.toIso),
      { params: ProjectParams, query: RangeQuery, response: SignalAnalytics, detail: { summary: "Signal analytics" } },
    )
    .post(
      `${base}/signals/resolve`,
      async ({ principal, params, body }) =>
        signals.lifecycle(await projectOf(ctx, principal, params.projectSlug), body.signalIds, "resolve", body.keepMonitoring),
      { params: ProjectParams, body: ResolveBody, response: LifecycleResponse, detail: { summary: "Resolve signals" } },
    )
    .post(
      `${base}/signals/export`,
      async ({ principal, params, body, status }) => status(202, await queueSignalsExport(ctx, await projectOf(ctx, principal, params.projectSlug), body)),
      { params: ProjectParams, body: ExportBody, response: { 202: ExportResponse }, detail: { summary: "Export signals as CSV by email" } },
    );
  for (const { action, summary } of lifecycleActions) {
    app = app.post(
      `${base}/signals/${action}`,
      async ({ principal, params, body }) => signals.lifecycle(await projectOf(ctx, principal, params.projectSlug), body.signalIds, action),
      { params: ProjectParams, body: LifecycleBody, response: LifecycleResponse, detail: { summary } },
    );
  }
  return app
    .get(`${base}/signals/:signalSlug`, async ({ principal, params }) => signals.get(await projectOf(ctx, principal, params.projectSlug), params.signalSlug), {
      params: SignalParams,
      response: SignalDetail,
      detail: { summary: "Get a signal", description: "Lifetime occurrence stats, its evaluations with alignment, monitoring state and feedback." },
    })
    .patch(
      `${base}/signals/:signalSlug`,
      async ({ principal, params, body }) => signals.update(await projectOf(ctx, principal, params.projectSlug), params.signalSlug, body),
      { params: SignalParams, body: UpdateSignalBody, response: UpdateSignalResponse, detail: { summary: "Update a signal" } },
    )
    .delete(
      `${base}/signals/:signalSlug`,
      async ({ principal, params, set }) => {
        await signals.delete(await projectOf(ctx, principal, params.projectSlug), params.signalSlug);
        set.status = 204;
      },
      { params: SignalParams, detail: { summary: "Delete a signal" } },
    )
    .get(
      `${base}/signals/:signalSlug/trend`,
      async ({ principal, params, query }) => signals.histogram(await projectOf(ctx, principal, params.projectSlug), params.signalSlug, query.fromIso, query.toIso),
      { params: SignalParams, query: RangeQuery, response: SignalHistogram, detail: { summary: "Signal occurrences per 12-hour bucket" } },
    )
    .get(
      `${base}/signals/:signalSlug/traces`,
      async ({ principal, params, query }) => signals.traces(await projectOf(ctx, principal, params.projectSlug), params.signalSlug, query),
      { params: SignalParams, query: PageQuery, response: PaginatedTraces, detail: { summary: "Traces where the signal occurred" } },
    )
    .post(
      `${base}/signals/:signalSlug/feedback`,
      async ({ principal, params, body }) => signals.submitFeedback(await projectOf(ctx, principal, params.projectSlug), params.signalSlug, body),
      { params: SignalParams, body: FeedbackBody, response: FeedbackResponse, detail: { summary: "Submit a verdict on a signal" } },
    )
    .post(
      `${base}/signals/:signalSlug/monitor`,
      async ({ principal, params, status }) => {
        const project = await projectOf(ctx, principal, params.projectSlug);
        return status(202, await monitorSignal(ctx.sql, project, await signals.find(project, params.signalSlug)));
      },
      { params: SignalParams, response: { 202: MonitorResponse }, detail: { summary: "Monitor a signal with an evaluation" } },
    )
    .post(
      `${base}/signals/:signalSlug/unmonitor`,
      async ({ principal, params, set }) => {
        const project = await projectOf(ctx, principal, params.projectSlug);
        await unmonitorSignal(ctx.sql, await signals.find(project, params.signalSlug));
        set.status = 204;
      },
      { params: SignalParams, detail: { summary: "Stop monitoring a signal" } },
    )
    .get(
      `${base}/sessions/:sessionId/signals`,
      async ({ principal, params }) => ({ items: await signals.sessionSignals(await projectOf(ctx, principal, params.projectSlug), params.sessionId) }),
      { params: SessionParams, response: SessionSignals, detail: { summary: "Signals of a session" } },
    )
    .get(
      `${base}/sessions/:sessionId/signals/:signalSlug`,
      async ({ principal, params }) => {
        const [signal] = await signals.sessionSignals(await projectOf(ctx, principal, params.projectSlug), params.sessionId, params.signalSlug);
        if (!signal) throw notFound("Signal");
        return signal;
      },
      { params: SessionSignalParams, response: SessionSignal, detail: { summary: "A signal's occurrences in a session" } },
    )
    .get(
      `${base}/users/:userId/signals`,
      async ({ principal, params, query }) => signals.userSignals(await projectOf(ctx, principal, params.projectSlug), params.userId, query.limit),
      { params: UserParams, query: LimitQuery, response: UserSignals, detail: { summary: "Signals on a user's traces" } },
    );
};
