import type { Sql } from "../../db/postgres";
import { newId } from "../../lib/ids";
import type { Logger } from "../../lib/log";
import type { Mailer } from "../../lib/mailer";
import type { ProjectSettings } from "../projects/model";
import { incidentRowColumns, type IncidentRow } from "./incidents";
import type { WebhookEvent, WebhookRow } from "./webhooks";

/** This many openings of one project in one run, or in the last `digestWindowMinutes`, go out as one digest. */
export const digestThreshold = 3;
export const digestWindowMinutes = 10;

interface PendingRow extends IncidentRow {
  project_slug: string;
  project_name: string;
}

const kindTitles: Record<IncidentRow["kind"], string> = {
  "monitor.match": "New match",
  "monitor.threshold": "Threshold crossed",
  "monitor.escalating": "Escalating",
  "signal.new": "New signal",
  "signal.regressed": "Signal regressed",
  "signal.escalating": "Signal escalating",
};

const round = (value: unknown) => (typeof value === "number" ? Number(value.toPrecision(6)) : value);

/** What tripped an incident, in a line or two: the source, the numbers, and where to look. */
function describe(row: PendingRow, publicUrl: string): { title: string; lines: string[] } {
  const details = row.details as Record<string, any>;
  const source = details.signal?.name ?? details.monitor?.name ?? row.source_id;
  const title = `${kindTitles[row.kind]}: ${source}`;
  const lines = [`${title} (${row.severity}) in project ${row.project_name}, since ${row.started_at.toISOString()}.`];
  if (details.value !== undefined) {
    const metric = details.metric ? (details.metric.field ? `${details.metric.kind} ${details.metric.field}` : details.metric.kind) : "count";
    const parts = [`${metric} = ${round(details.value)}`];
    if (details.threshold !== undefined && details.threshold !== null) parts.push(`threshold ${details.direction === "below" ? "<" : ">"} ${round(details.threshold)}`);
    if (details.expected !== undefined) parts.push(`expected ${round(details.expected)}`);
    if (details.baseline !== undefined && details.baseline !== null) parts.push(`baseline ${round(details.baseline)}`);
    if (details.last6PerHour !== undefined) parts.push(`last 6 hours ${round(details.last6PerHour)}/h`);
    lines.push(parts.join(", "));
  }
  const base = `${publicUrl}/v1/projects/${row.project_slug}`;
  if (details.traceId) lines.push(`Trace: ${base}/traces/${details.traceId}`);
  if (details.monitor?.slug) lines.push(`Monitor incidents: ${base}/monitors/${details.monitor.slug}/incidents`);
  lines.push(`All incidents: ${base}/incidents`);
  return { title, lines };
}

/**
 * Mails incidents to the organization's members: one mail per opening (a digest when many open
 * together), and the closing as a reply in the same thread. Pending notices are claimed with
 * FOR UPDATE SKIP LOCKED, so each is sent by one process, once; an evaluation tick that finds the
 * same incident open again sends nothing.
 */
export class IncidentNotifier {
  private readonly host: string;

  constructor(
    private readonly sql: Sql,
    private readonly mailer: Mailer,
    private readonly publicUrl: string,
    /** Queues a webhook delivery; true when the project has a live webhook. */
    private readonly webhook: (row: IncidentRow, event: WebhookEvent, project: { slug: string }) => Promise<boolean>,
    private readonly log: Logger,
  ) {
    this.host = new URL(publicUrl).hostname || "vigil";
  }

  async run(): Promise<{ mails: number }> {
    let mails = 0;
    await this.sql.begin(async (tx) => {
      const rows = await tx<PendingRow[]>`
        SELECT ${tx.unsafe(incidentRowColumns.split(", ").map((column) => `i.${column}`).join(", "))}, p.slug AS project_slug, p.name AS project_name
        FROM incidents i JOIN projects p ON p.id = i.project_id
        WHERE i.open_notice = 'pending' OR i.close_notice = 'pending'
        ORDER BY i.created_at, i.id LIMIT 500
        FOR UPDATE OF i SKIP LOCKED`;
      const byProject = new Map<string, PendingRow[]>();
      for (const row of rows) byProject.set(row.project_id, [...(byProject.get(row.project_id) ?? []), row]);
      for (const [projectId, pending] of byProject) mails += await this.project(tx as unknown as Sql, projectId, pending);
    });
    if (mails) this.log.info("incident notices mailed", { mails });
    return { mails };
  }

  private async project(tx: Sql, projectId: string, pending: PendingRow[]): Promise<number> {
    const recipients = (
      await tx<{ email: string }[]>`
        SELECT u.email FROM memberships m JOIN users u ON u.id = m.user_id WHERE m.organization_id = ${pending[0].organization_id} ORDER BY u.email`
    ).map((row) => row.email);
    const opens = pending.filter((row) => row.open_notice === "pending");
    const closes = pending.filter((row) => row.close_notice === "pending" && row.open_notice !== "pending");
    const slug = { slug: pending[0].project_slug };
    let mails = 0;

    const [{ recent }] = await tx<{ recent: number }[]>`
      SELECT count(*)::int AS recent FROM incidents
      WHERE project_id = ${projectId} AND notified AND created_at > now() - make_interval(mins => ${digestWindowMinutes})`;
    const digest = opens.length >= digestThreshold || (opens.length > 0 && recent >= digestThreshold);
    const messageIds = new Map<string, string>();
    if (digest) {
      const messageId = `<digest-${newId()}@${this.host}>`;
      const text = [
        `${opens.length} incidents opened in project ${pending[0].project_name}:`,
        "",
        ...opens.flatMap((row) => [...describe(row, this.publicUrl).lines, ""]),
      ].join("\n");
      for (const to of recipients) await this.mailer.sendMail({ to, subject: `[Vigil] ${opens.length} incidents in ${pending[0].project_name}`, text, messageId });
      mails += recipients.length;
      for (const row of opens) messageIds.set(row.id, messageId);
    } else {
      for (const row of opens) {
        const messageId = `<incident-${row.id}@${this.host}>`;
        const { title, lines } = describe(row, this.publicUrl);
        const closedToo = row.ended_at && row.item_key === null ? [`It closed at ${row.ended_at.toISOString()}.`] : [];
        for (const to of recipients) await this.mailer.sendMail({ to, subject: `[Vigil] ${title}`, text: [...lines, ...closedToo].join("\n"), messageId });
        mails += recipients.length;
        messageIds.set(row.id, messageId);
      }
    }
    for (const row of opens) {
      const hooked = await this.webhook(row, "incident.opened", slug);
      const closedAlready = row.close_notice === "pending";
      if (closedAlready) await this.webhook(row, "incident.closed", slug);
      await tx`
        UPDATE incidents SET open_notice = 'sent', notified = ${recipients.length > 0 || hooked}, mail_message_id = ${messageIds.get(row.id) ?? null},
          close_notice = ${closedAlready ? "sent" : row.close_notice}
        WHERE id = ${row.id}`;
    }
    for (const row of closes) {
      if (row.mail_message_id) {
        const { title } = describe(row, this.publicUrl);
        const text = [`Resolved: ${title}`, `Open from ${row.started_at.toISOString()} to ${row.ended_at?.toISOString()}.`, ...describe(row, this.publicUrl).lines.slice(1)].join("\n");
        for (const to of recipients) {
          await this.mailer.sendMail({ to, subject: `Re: [Vigil] ${title}`, text, inReplyTo: row.mail_message_id, references: row.mail_message_id });
        }
        mails += recipients.length;
      }
      await this.webhook(row, "incident.closed", slug);
      await tx`UPDATE incidents SET close_notice = 'sent' WHERE id = ${row.id}`;
    }
    return mails;
  }
}

/** Tells the organization's members that a webhook was quarantined, unless the project turned that off. */
export async function notifyQuarantine(sql: Sql, mailer: Mailer, webhook: WebhookRow, log: Logger): Promise<void> {
  const [project] = await sql<{ name: string; settings: ProjectSettings | null }[]>`SELECT name, settings FROM projects WHERE id = ${webhook.project_id}`;
  if (!project || project.settings?.notifications?.destinations?.quarantine === false) return;
  const recipients = await sql<{ email: string }[]>`
    SELECT u.email FROM memberships m JOIN users u ON u.id = m.user_id WHERE m.organization_id = ${webhook.organization_id}`;
  for (const { email } of recipients) {
    await mailer.sendMail({
      to: email,
      subject: `[Vigil] Webhook quarantined in ${project.name}`,
      text: [
        `The incident webhook of project ${project.name} (${webhook.url}) failed repeatedly and is quarantined: no more deliveries are attempted.`,
        `Last error: ${webhook.last_error ?? "unknown"}.`,
        "Set the webhook again (PUT /v1/projects/{projectSlug}/webhook) once the receiver is fixed.",
      ].join("\n"),
    });
  }
  log.warn("webhook quarantined", { projectId: webhook.project_id });
}
