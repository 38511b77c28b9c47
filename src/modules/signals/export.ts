import type { Context } from "../../context";
import { badRequest } from "../../lib/errors";
import { createMailer } from "../../lib/mailer";
import type { ProjectRef } from "../traces/service";
import { SignalsService } from "./service";

export const signalsExportQueue = "signals-export";

interface ExportJob {
  project: ProjectRef;
  recipient: string;
  signalIds?: string[];
  lifecycleGroup?: "active" | "archived";
}

/** Queues a CSV export of a project's signals for a member of the organization. */
export async function queueSignalsExport(ctx: Context, project: ProjectRef, body: Omit<ExportJob, "project">) {
  const [member] = await ctx.sql<{ email: string }[]>`
    SELECT u.email FROM memberships m JOIN users u ON u.id = m.user_id
    WHERE m.organization_id = ${project.organizationId} AND lower(u.email) = lower(${body.recipient})`;
  if (!member) throw badRequest("recipient: must be the email of a member of this organization");
  await ctx.boss.send(signalsExportQueue, { project, recipient: member.email, signalIds: body.signalIds, lifecycleGroup: body.lifecycleGroup } satisfies ExportJob);
  return { status: "queued" as const };
}

const columns = ["id", "slug", "name", "description", "source", "states", "occurrences", "firstSeenAt", "lastSeenAt", "resolvedAt", "ignoredAt", "mutedAt"] as const;

/** RFC 4180 cell; text a spreadsheet would run as a formula gets an apostrophe first. */
function csvCell(value: unknown): string {
  if (value === null || value === undefined) return "";
  let text = Array.isArray(value) ? value.join(" ") : String(value);
  if (/^[=+\-@\t\r]/.test(text)) text = `'${text}`;
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

/** The export job: every matching signal over the last 90 days, mailed as CSV text. */
export async function runSignalsExport(ctx: Context, job: ExportJob) {
  const service = new SignalsService(ctx);
  const lines = [columns.join(",")];
  let cursor: string | undefined;
  const from = new Date(Date.now() - 90 * 86_400_000).toISOString();
  do {
    const page = await service.list(job.project, { cursor, limit: 200, fromIso: from });
    for (const signal of page.items) {
      if (job.signalIds && !job.signalIds.includes(signal.id)) continue;
      // Here "active" means unmuted and "archived" muted (ExportSignalsBody), unlike the list's groups.
      if (job.lifecycleGroup && (job.lifecycleGroup === "archived") !== (signal.mutedAt !== null)) continue;
      lines.push(columns.map((column) => csvCell(signal[column])).join(","));
    }
    cursor = page.nextCursor ?? undefined;
  } while (cursor);
  const mailer = createMailer(ctx.config, ctx.log);
  await mailer.sendMail({ to: job.recipient, subject: `Vigil signals export (${lines.length - 1} signals)`, text: lines.join("\r\n") });
  await mailer.drain();
}
