import { randomBytes } from "node:crypto";
import { mkdir, open, rename, rm } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import type { Config } from "../../config";
import type { Sql } from "../../db/postgres";
import { badRequest, HttpError, notFound, tooManyRequests } from "../../lib/errors";
import { constantTimeEqual, newId, sha256Hex } from "../../lib/ids";
import type { Logger } from "../../lib/log";
import type { Mailer } from "../../lib/mailer";
import type { RateLimiter } from "../../lib/rate-limit";
import type { EmailConfirmations } from "../email-confirmations/service";
import { validateTraceFilters, type FilterSet } from "./filters";
import { Trace, type ExportTracesBody } from "./model";
import type { ProjectRef, TracesService } from "./service";

/**
 * CSV exports of traces. A request is a row of `trace_exports`, which is also the job queue: any
 * Vigil process claims the oldest pending export with FOR UPDATE SKIP LOCKED, writes the CSV into
 * `$DATA_DIR/exports/` a chunk of traces at a time (bounded memory whatever the row count), and
 * emails the recipient a link whose secret is stored only as a SHA-256 hash. With several processes
 * the exports directory must be shared storage, since any process may serve the download.
 */

type Selection = { by: "ids"; ids: string[] } | { by: "filters"; filters: FilterSet };

interface ExportRow {
  id: string;
  organization_id: string;
  project_id: string;
  recipient: string;
  selection: Selection;
  attempts: number;
}

/** Traces whose ids a filtered export selects at a time (see `TracesService.matchingTraceIds`). */
const idWindow = 50_000;
/** Traces read and written to the CSV at a time. */
const itemBatch = 2_000;
const maxAttempts = 5;
const lockMinutes = 15;
const linkValidDays = 7;
const pollMs = 2_000;
const sweepEveryMs = 3600_000;

/** Where an export's CSV lives: `file` once complete, `partial` while it is written. */
export function exportFiles(dataDir: string, exportId: string) {
  const file = join(dataDir, "exports", `${exportId}.csv`);
  return { file, partial: `${file}.partial` };
}

/** The Trace fields, in schema order, are the CSV columns. */
const columns = Object.keys(Trace.properties) as (keyof Trace)[];

/** RFC 4180 quoting; a text cell a spreadsheet would run as a formula is prefixed with an apostrophe. */
function csvCell(value: Trace[keyof Trace]): string {
  if (value === null) return "";
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  let text = Array.isArray(value) ? JSON.stringify(value) : value;
  if (/^[=+\-@\t\r]/.test(text)) text = `'${text}`;
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

export const csvHeader = `${columns.join(",")}\r\n`;
export const csvRow = (trace: Trace) => `${columns.map((column) => csvCell(trace[column])).join(",")}\r\n`;

export class TraceExports {
  private timer: ReturnType<typeof setTimeout> | null = null;
  private running: Promise<void> | null = null;
  private stopped = false;
  private lastSweep = 0;

  constructor(
    private readonly sql: Sql,
    private readonly traces: TracesService,
    private readonly mailer: Mailer,
    private readonly config: Pick<Config, "dataDir" | "publicUrl" | "exportRateLimitPerHour">,
    private readonly log: Logger,
    private readonly confirmations: EmailConfirmations,
    private readonly rateLimiter: RateLimiter,
  ) {}

  /**
   * Queues an export; 400 when the recipient is not a member of the organization or the filters are
   * invalid, 429 past the organization's hourly limit, 403 while the recipient's address is unconfirmed
   * (a confirmation link is mailed to it then).
   */
  async request(project: ProjectRef, body: ExportTracesBody): Promise<{ status: "queued" }> {
    const selection: Selection =
      body.traces.by === "ids" ? { by: "ids", ids: [...new Set(body.traces.ids)] } : { by: "filters", filters: body.traces.filters };
    if (selection.by === "filters") validateTraceFilters(selection.filters);
    // Mail goes to the address on file for the member, whatever case the request used.
    const [member] = await this.sql<{ email: string }[]>`
      SELECT u.email FROM memberships m JOIN users u ON u.id = m.user_id
      WHERE m.organization_id = ${project.organizationId} AND lower(u.email) = lower(${body.recipient})`;
    if (!member) throw badRequest("recipient: must be the email of a member of this organization");
    const limit = await this.rateLimiter.hit(`trace-export:${project.organizationId}`, this.config.exportRateLimitPerHour, 3600);
    if (!limit.allowed) throw tooManyRequests(limit.retryAfterSeconds, `At most ${this.config.exportRateLimitPerHour} exports per hour per organization`);
    if (!(await this.confirmations.isConfirmed(member.email))) {
      await this.confirmations.requestConfirmation(member.email);
      throw new HttpError(403, "recipient: this address has not confirmed it receives Vigil's mail; a confirmation link was mailed to it. Request the export again once it is confirmed");
    }
    await this.sql`
      INSERT INTO trace_exports (id, organization_id, project_id, recipient, selection)
      VALUES (${newId()}, ${project.organizationId}, ${project.id}, ${member.email}, ${this.sql.json(selection as never)})`;
    this.wake();
    return { status: "queued" };
  }

  /**
   * The file of a written export, for the holder of its link's secret. The link works as soon as its
   * hash is stored, before the mail carrying it is sent and the job is marked done: a recipient may
   * open it the moment it arrives.
   */
  async download(exportId: string, token: string): Promise<{ path: string; fileName: string }> {
    const [row] = await this.sql<{ token_hash: string | null; file_name: string | null; expired: boolean }[]>`
      SELECT token_hash, file_name, expires_at < now() AS expired FROM trace_exports WHERE id = ${exportId}`;
    if (!row?.token_hash || !constantTimeEqual(sha256Hex(token), row.token_hash)) throw notFound("Export");
    if (row.expired || !row.file_name) throw new HttpError(410, "This export link has expired; request a new export");
    return { path: exportFiles(this.config.dataDir, exportId).file, fileName: `traces-${exportId}.csv` };
  }

  start(): void {
    this.schedule(0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.running;
  }

  /** Runs the worker now instead of at its next poll, unless it is already busy. */
  private wake(): void {
    if (this.running || this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    this.schedule(0);
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.running = this.work().finally(() => {
        this.running = null;
        this.schedule(pollMs);
      });
    }, ms);
  }

  /** Runs pending exports until none is left; errors are logged, never thrown. */
  async work(): Promise<void> {
    try {
      for (let job = await this.claim(); job && !this.stopped; job = await this.claim()) await this.run(job);
      if (Date.now() - this.lastSweep > sweepEveryMs) await this.sweepExpired();
    } catch (error) {
      this.log.error("trace export worker failed", { error: error as Error });
    }
  }

  private async claim(): Promise<ExportRow | null> {
    const [row] = await this.sql<ExportRow[]>`
      UPDATE trace_exports SET status = 'running', attempts = attempts + 1, locked_until = now() + make_interval(mins => ${lockMinutes})
      WHERE id = (
        SELECT id FROM trace_exports
        WHERE (status = 'queued' AND run_after <= now()) OR (status = 'running' AND locked_until < now())
        ORDER BY created_at
        FOR UPDATE SKIP LOCKED
        LIMIT 1)
      RETURNING id, organization_id, project_id, recipient, selection, attempts`;
    return row ?? null;
  }

  private async run(job: ExportRow): Promise<void> {
    const project = { id: job.project_id, organizationId: job.organization_id };
    const files = exportFiles(this.config.dataDir, job.id);
    const fileName = basename(files.file);
    try {
      const rowCount = await this.writeCsv(project, job.selection, files);
      const token = randomBytes(32).toString("base64url");
      const [done] = await this.sql<{ expires_at: Date }[]>`
        UPDATE trace_exports
        SET token_hash = ${sha256Hex(token)}, file_name = ${fileName}, row_count = ${rowCount},
            expires_at = now() + make_interval(days => ${linkValidDays})
        WHERE id = ${job.id} RETURNING expires_at`;
      const link = `${this.config.publicUrl}/v1/exports/${job.id}?token=${token}`;
      await this.mailer.sendMail({
        to: job.recipient,
        subject: "Your Vigil trace export is ready",
        text: `Your export of ${rowCount} trace${rowCount === 1 ? "" : "s"} is ready:\n\n${link}\n\nThe link works until ${done.expires_at.toISOString()}.\n`,
      });
      await this.sql`UPDATE trace_exports SET status = 'done', finished_at = now(), locked_until = NULL WHERE id = ${job.id}`;
      this.log.info("trace export sent", { exportId: job.id, rows: rowCount });
    } catch (error) {
      await rm(files.partial, { force: true });
      const failed = job.attempts >= maxAttempts;
      this.log.error("trace export failed", { exportId: job.id, attempt: job.attempts, final: failed, error: error as Error });
      await this.sql`
        UPDATE trace_exports
        SET status = ${failed ? "failed" : "queued"}, error = ${(error as Error).message}, locked_until = NULL,
            run_after = now() + make_interval(secs => ${30 * job.attempts})
        WHERE id = ${job.id}`;
    }
  }

  /** Writes the CSV beside its final name and renames it once complete, so a download never sees half a file. */
  private async writeCsv(project: ProjectRef, selection: Selection, { file: path, partial }: ReturnType<typeof exportFiles>): Promise<number> {
    await mkdir(dirname(path), { recursive: true });
    const file = await open(partial, "w", 0o600);
    let rows = 0;
    try {
      await file.write(csvHeader);
      const selected: AsyncIterable<{ ids: string[]; snapshot?: string }> | { ids: string[]; snapshot?: string }[] =
        selection.by === "ids" ? [{ ids: selection.ids }] : this.traces.matchingTraceIds(project, validateTraceFilters(selection.filters), idWindow);
      for await (const { ids, snapshot } of selected) {
        for (let i = 0; i < ids.length; i += itemBatch) {
          const items = await this.traces.traceItems(project, ids.slice(i, i + itemBatch), snapshot);
          await file.write(items.map(csvRow).join(""));
          rows += items.length;
        }
      }
    } finally {
      await file.close();
    }
    await rename(partial, path);
    return rows;
  }

  /** Deletes the files of expired exports. */
  private async sweepExpired(): Promise<void> {
    this.lastSweep = Date.now();
    const expired = await this.sql<{ id: string }[]>`
      UPDATE trace_exports SET file_name = NULL WHERE expires_at < now() AND file_name IS NOT NULL RETURNING id`;
    for (const { id } of expired) await rm(exportFiles(this.config.dataDir, id).file, { force: true });
  }
}
