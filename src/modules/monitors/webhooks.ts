import { createHmac, randomBytes } from "node:crypto";
import type { Sql } from "../../db/postgres";
import type { Boss } from "../../jobs/boss";
import { notFound } from "../../lib/errors";
import type { Logger } from "../../lib/log";
import type { ProjectRef } from "../traces/service";
import { toIncident, type IncidentRow } from "./incidents";

/**
 * Incident webhooks: one URL per project receives a POST of the incident as JSON, signed with
 * HMAC-SHA256. Deliveries are pg-boss jobs retried with exponential backoff; when one exhausts its
 * attempts the webhook is quarantined (no more deliveries until it is set again) and members are told.
 */

export const webhookQueue = "deliver-incident-webhook";

export interface WebhookRow {
  project_id: string;
  organization_id: string;
  url: string;
  secret: string;
  quarantined_at: Date | null;
  last_error: string | null;
  created_at: Date;
}

export const toWebhook = (row: WebhookRow, secret?: string) => ({
  url: row.url,
  quarantinedAt: row.quarantined_at?.toISOString() ?? null,
  lastError: row.last_error,
  createdAt: row.created_at.toISOString(),
  ...(secret ? { secret } : {}),
});

/**
 * The signature of a delivery: `sha256=` and the hex HMAC-SHA256, under the webhook's secret, of
 * `<timestamp>.<body>` (the `X-Vigil-Timestamp` header, then the raw body). Receivers recompute it
 * and reject old timestamps to stop replays.
 */
export const signWebhook = (secret: string, timestamp: string, body: string) => `sha256=${createHmac("sha256", secret).update(`${timestamp}.${body}`).digest("hex")}`;

export class Webhooks {
  constructor(private readonly sql: Sql) {}

  async get(project: ProjectRef) {
    const [row] = await this.sql<WebhookRow[]>`SELECT * FROM project_webhooks WHERE project_id = ${project.id} AND organization_id = ${project.organizationId}`;
    if (!row) throw notFound("Webhook");
    return toWebhook(row);
  }

  /** Sets (or replaces) the URL with a new secret, shown in this answer only; lifts a quarantine. */
  async set(project: ProjectRef, url: string) {
    const secret = `whsec_${randomBytes(24).toString("base64url")}`;
    const [row] = await this.sql<WebhookRow[]>`
      INSERT INTO project_webhooks (project_id, organization_id, url, secret) VALUES (${project.id}, ${project.organizationId}, ${url}, ${secret})
      ON CONFLICT (project_id) DO UPDATE SET url = excluded.url, secret = excluded.secret, quarantined_at = NULL, last_error = NULL, updated_at = now()
      RETURNING *`;
    return toWebhook(row!, secret);
  }

  async remove(project: ProjectRef) {
    const rows = await this.sql`DELETE FROM project_webhooks WHERE project_id = ${project.id} AND organization_id = ${project.organizationId} RETURNING project_id`;
    if (!rows.length) throw notFound("Webhook");
  }
}

export type WebhookEvent = "incident.opened" | "incident.closed";

export interface WebhookJob {
  projectId: string;
  event: WebhookEvent;
  payload: Record<string, unknown>;
}

/** Queues the delivery of an incident event when the project has a live webhook. */
export async function enqueueWebhook(sql: Sql, boss: Boss, settings: { retryDelaySeconds: number; maxAttempts: number }, incident: IncidentRow, event: WebhookEvent, project: { slug: string }): Promise<boolean> {
  const [hook] = await sql<{ project_id: string }[]>`SELECT project_id FROM project_webhooks WHERE project_id = ${incident.project_id} AND quarantined_at IS NULL`;
  if (!hook) return false;
  const payload = { event, project: { id: incident.project_id, slug: project.slug }, incident: toIncident(incident), kind: incident.kind, details: incident.details };
  await boss.send(webhookQueue, { projectId: incident.project_id, event, payload } satisfies WebhookJob, {
    retryLimit: settings.maxAttempts - 1,
    retryDelay: settings.retryDelaySeconds,
    retryBackoff: true,
  });
  return true;
}

/** One delivery attempt; throws so pg-boss retries. The last failing attempt quarantines the webhook. */
export async function deliverWebhook(
  sql: Sql,
  job: { id: string; data: WebhookJob; retryCount: number },
  maxAttempts: number,
  onQuarantine: (webhook: WebhookRow) => Promise<void>,
  log: Logger,
): Promise<void> {
  const [hook] = await sql<WebhookRow[]>`SELECT * FROM project_webhooks WHERE project_id = ${job.data.projectId}`;
  if (!hook || hook.quarantined_at) return;
  const body = JSON.stringify(job.data.payload);
  const timestamp = String(Math.floor(Date.now() / 1000));
  let failure: string | null = null;
  try {
    const response = await fetch(hook.url, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "user-agent": "Vigil-Webhook",
        "x-vigil-event": job.data.event,
        "x-vigil-delivery": job.id,
        "x-vigil-timestamp": timestamp,
        "x-vigil-signature": signWebhook(hook.secret, timestamp, body),
      },
      body,
      redirect: "manual",
      signal: AbortSignal.timeout(10_000),
    });
    await response.body?.cancel();
    if (response.status < 200 || response.status >= 300) failure = `HTTP ${response.status}`;
  } catch (error) {
    failure = (error as Error).message || "request failed";
  }
  if (!failure) {
    await sql`UPDATE project_webhooks SET last_error = NULL WHERE project_id = ${hook.project_id}`;
    return;
  }
  const last = job.retryCount + 1 >= maxAttempts;
  log.warn("webhook delivery failed", { projectId: hook.project_id, attempt: job.retryCount + 1, error: failure, quarantine: last });
  if (last) {
    const [quarantined] = await sql<WebhookRow[]>`
      UPDATE project_webhooks SET quarantined_at = now(), last_error = ${failure}, updated_at = now()
      WHERE project_id = ${hook.project_id} AND quarantined_at IS NULL AND secret = ${hook.secret} RETURNING *`;
    if (quarantined) await onQuarantine(quarantined);
  } else {
    await sql`UPDATE project_webhooks SET last_error = ${failure} WHERE project_id = ${hook.project_id}`;
  }
  throw new Error(`webhook delivery failed: ${failure}`);
}
