import type { Sql } from "../db/postgres";
import { badRequest, unauthorized, unavailable } from "../lib/errors";
import { attributeText } from "./attributes";
import { BackpressureError } from "./batch";
import { DecodeError, decodeJson, decodeProtobuf, type DecodedTraces } from "./decode";
import { mapResource, mapSpan, type SpanOwner } from "./map";
import { priceSpan } from "./price";
import type { OtlpBody } from "./receive";
import type { SpanRedactor } from "./redact";
import type { RedactionPolicies } from "./redaction-policy";
import type { Logger } from "../lib/log";
import type { AuthService } from "../modules/auth/service";
import type { ExportOutcome } from "./respond";
import type { SpanRow } from "./row";
import { defaultRetentionDays, limitAttributes, outsideWindow, type SpanLimits } from "./span-limits";

/** Where rows go once mapped: `accept` resolves when they are durable; both throw BackpressureError when full. */
export interface SpanSink {
  admit(approxBytes: number): void;
  accept(rows: readonly SpanRow[], approxBytes: number): Promise<void>;
}

/** The OTLP signals Vigil receives: spans, and log records (GenAI events carrying a span's messages). */
export type OtlpSignal = "traces" | "logs";

/** Log records of one export, read by the logs stage with the export's projects (src/ingest/logs.ts). */
export interface LogSink {
  accept(owner: ExportOwner, request: ExportRequest, body: OtlpBody, projects: ExportProjects): Promise<ExportOutcome>;
}

export type ExportOwner = Omit<SpanOwner, "projectId">;

export interface ExportRequest {
  authorization: string | null;
  /** `X-Latitude-Project`: the project of spans that name none themselves. */
  project: string | null;
  /** The body's size as announced before it is read (Content-Length), 0 when unknown. */
  announcedBytes: number;
}

export interface ProjectRef {
  id: string;
  hasFirstTrace: boolean;
}

const projectCacheMs = 10_000;
const unknownProjectCacheMs = 1_000;
/** The attribute naming a span's or log record's project, on the record or its resource. */
export const PROJECT_ATTRIBUTE = "latitude.project";

/** receive → decode → map → redact → price → batch, shared by the HTTP and gRPC receivers. */
export class IngestPipeline {
  private projects = new Map<string, Map<string, { ref: ProjectRef | null; expiresAt: number }>>();
  /** Exports decoding or writing, bodies in memory. */
  private inFlight = 0;
  /** Bodies being received, per organization. */
  private readonly reading = new Map<string, number>();

  constructor(
    private readonly auth: AuthService,
    private readonly sql: Sql,
    private readonly policies: RedactionPolicies,
    private readonly sink: SpanSink,
    private readonly logs: LogSink,
    /**
     * Exports decoded at once. Decoding and mapping are CPU-bound, so past a few dozen more concurrency
     * only queues work and memory: beyond it senders get a 503 at once and back off.
     */
    private readonly maxConcurrentExports: number,
    private readonly log: Logger,
    /** Per-span limits and the accepted start times (INGEST_MAX_ATTRIBUTE_VALUE_BYTES, INGEST_MAX_ATTRIBUTES_PER_SPAN, INGEST_MAX_FUTURE_SECONDS). */
    private readonly spanLimits: SpanLimits & { maxFutureSkewMs: number },
  ) {}

  /**
   * Runs one export. The credential is checked and the writer asked for room before the body is read, so
   * neither an unauthenticated sender nor a saturated writer costs a decompression or a decode. A decode
   * slot is taken only once the body is in memory: senders that are slow to send it hold no slot, and
   * each organization may be reading at most `maxConcurrentExports` bodies at once.
   */
  async export(request: ExportRequest, readBody: () => Promise<OtlpBody>, signal: OtlpSignal = "traces"): Promise<ExportOutcome> {
    const owner = await this.owner(request.authorization);
    try {
      this.sink.admit(request.announcedBytes);
    } catch (error) {
      throw saturated(error);
    }
    const reading = this.reading.get(owner.organizationId) ?? 0;
    if (reading >= this.maxConcurrentExports) throw saturated(new BackpressureError("busy", 1));
    this.reading.set(owner.organizationId, reading + 1);
    let body: OtlpBody;
    try {
      body = await readBody();
    } finally {
      const left = (this.reading.get(owner.organizationId) ?? 1) - 1;
      if (left > 0) this.reading.set(owner.organizationId, left);
      else this.reading.delete(owner.organizationId);
    }
    if (this.inFlight >= this.maxConcurrentExports) throw saturated(new BackpressureError("busy", 1));
    this.inFlight++;
    try {
      const projects = new ExportProjects(owner.organizationId, this.policies, (reference) => this.project(owner.organizationId, reference));
      return signal === "traces" ? await this.traces(owner, request, body, projects) : await this.logs.accept(owner, request, body, projects);
    } finally {
      this.inFlight--;
    }
  }

  /** The API key's organization, or a 401; the gRPC receiver asks before it accepts a message. */
  async owner(authorization: string | null): Promise<ExportOwner> {
    const principal = await this.auth.fromHeader(authorization);
    if (principal.kind !== "api_key" || !principal.apiKeyId) throw unauthorized("Ingest accepts API keys only");
    return { organizationId: principal.organizationId, apiKeyId: principal.apiKeyId };
  }

  /**
   * Spans Vigil makes itself (prompt gateway runs) on behalf of an API key: the same decode → map →
   * redact → price → write path as an export from that key, without the credential round trip.
   */
  async exportAs(owner: ExportOwner, body: OtlpBody): Promise<ExportOutcome> {
    try {
      this.sink.admit(body.bytes.byteLength);
    } catch (error) {
      throw saturated(error);
    }
    const projects = new ExportProjects(owner.organizationId, this.policies, (reference) => this.project(owner.organizationId, reference));
    return this.traces(owner, { authorization: null, project: null, announcedBytes: body.bytes.byteLength }, body, projects);
  }

  private async traces(owner: ExportOwner, request: ExportRequest, body: OtlpBody, projects: ExportProjects): Promise<ExportOutcome> {
    const decoded = decode(body);
    const rejections = decoded.rejected.map((rejected) => rejected.reason);
    const rows: SpanRow[] = [];
    // Spans outside the accepted window are valid OTLP: refused in a partial success, never a 400.
    const outsideRejections: string[] = [];

    for (const resourceSpans of decoded.resourceSpans) {
      const resource = mapResource(resourceSpans.resource);
      const resourceProject = attributeText(resourceSpans.resource.get(PROJECT_ATTRIBUTE)) || request.project || "";
      for (const { scope, spans } of resourceSpans.scopeSpans) {
        for (const span of spans) {
          const reference = attributeText(span.attributes.get(PROJECT_ATTRIBUTE)) || resourceProject;
          const project = projects.known(reference) ?? (await projects.resolve(reference));
          if (typeof project === "string") {
            rejections.push(`span ${span.spanId}: ${project}`);
            continue;
          }
          const row = mapSpan({ ...span, attributes: limitAttributes(span.attributes, this.spanLimits) }, resource, scope, { ...owner, projectId: project.ref.id });
          const outside = outsideWindow(row.start_time, row.retention_days, { ...this.spanLimits, defaultRetentionDays });
          if (outside) {
            outsideRejections.push(`span ${span.spanId}: ${outside}`);
            continue;
          }
          if (!project.redactor.isNoop) project.redactor.redactRow(row);
          rows.push(priceSpan(row));
        }
      }
    }
    if (rows.length === 0 && rejections.length > 0) throw badRequest(`All spans rejected: ${summarize([...rejections, ...outsideRejections])}`);
    rejections.push(...outsideRejections);
    // An empty request is a successful no-op, as for the OpenTelemetry Collector.
    if (rows.length === 0) return { rejected: rejections.length, errorMessage: summarize(rejections) };

    await this.sink.accept(rows, body.bytes.byteLength).catch((error) => {
      throw saturated(error);
    });
    for (const project of projects.resolved()) if (!project.hasFirstTrace) await this.markFirstTrace(project);
    return { rejected: rejections.length, errorMessage: rejections.length ? summarize(rejections) : "" };
  }

  /**
   * A project named by slug or id within the organization; null when there is none. Kept for
   * `projectCacheMs`, an unknown reference only for `unknownProjectCacheMs`; this process's project
   * changes call `forgetProjects`.
   */
  private async project(organizationId: string, reference: string): Promise<ProjectRef | null> {
    const now = Date.now();
    let known = this.projects.get(organizationId);
    const cached = known?.get(reference);
    if (cached && cached.expiresAt > now) return cached.ref;
    const [row] = await this.sql<{ id: string; first_trace_at: Date | null }[]>`
      SELECT id, first_trace_at FROM projects
      WHERE organization_id = ${organizationId} AND deleted_at IS NULL AND (id = ${reference} OR slug = ${reference})
      ORDER BY (id = ${reference}) DESC LIMIT 1`;
    const ref = row ? { id: row.id, hasFirstTrace: row.first_trace_at !== null } : null;
    if (this.projects.size > 10_000) this.projects.clear();
    if (!known) this.projects.set(organizationId, (known = new Map()));
    known.set(reference, { ref, expiresAt: now + (ref ? projectCacheMs : unknownProjectCacheMs) });
    return ref;
  }

  /** Drops the organization's cached project lookups: a project was created or deleted. */
  forgetProjects(organizationId: string): void {
    this.projects.delete(organizationId);
  }

  /**
   * Never fails the export: its spans are durable already, and an error here would only make the sender
   * retry them. A failed update is tried again by the project's next export.
   */
  private async markFirstTrace(project: ProjectRef) {
    try {
      await this.sql`UPDATE projects SET first_trace_at = now() WHERE id = ${project.id} AND first_trace_at IS NULL`;
      project.hasFirstTrace = true;
    } catch (error) {
      this.log.warn("recording a project's first trace failed", { projectId: project.id, error: error as Error });
    }
  }
}

function decode(body: OtlpBody): DecodedTraces {
  try {
    return body.encoding === "protobuf" ? decodeProtobuf(body.bytes) : decodeJson(body.bytes);
  } catch (error) {
    if (error instanceof DecodeError) throw badRequest(`Cannot decode OTLP ${body.encoding} body: ${error.message}`);
    throw error;
  }
}

/** A project of an export with its redactor. */
export type ExportProject = { ref: ProjectRef; redactor: SpanRedactor };

/** The projects one export names: each reference resolved once, each project's redactor fetched once. */
export class ExportProjects {
  private readonly byReference = new Map<string, ExportProject | null>();

  constructor(
    private readonly organizationId: string,
    private readonly policies: RedactionPolicies,
    private readonly lookup: (reference: string) => Promise<ProjectRef | null>,
  ) {}

  /** What `resolve` answered for `reference` before, without waiting: undefined the first time. */
  known(reference: string): ExportProject | string | undefined {
    const project = this.byReference.get(reference);
    return project === undefined ? undefined : (project ?? `unknown project "${reference}"`);
  }

  /** The project of a record naming `reference` (its own attribute, its resource's, else the header), or why the record is rejected. */
  async resolve(reference: string): Promise<ExportProject | string> {
    if (!reference) return `no project (set ${PROJECT_ATTRIBUTE} or X-Latitude-Project)`;
    let project = this.byReference.get(reference);
    if (project === undefined) {
      const ref = await this.lookup(reference);
      const known = ref && [...this.byReference.values()].find((other) => other?.ref.id === ref.id);
      project = known ?? (ref ? { ref, redactor: await this.policies.forProject(this.organizationId, ref.id) } : null);
      this.byReference.set(reference, project);
    }
    return project ?? `unknown project "${reference}"`;
  }

  resolved(): ProjectRef[] {
    return [...new Set([...this.byReference.values()].flatMap((project) => (project ? [project.ref] : [])))];
  }
}

/** A full writer is a 503 with its Retry-After; any other error passes through. */
export function saturated(error: unknown): unknown {
  return error instanceof BackpressureError ? unavailable(error.retryAfterSeconds, "Ingest is saturated, retry later") : error;
}

export function summarize(reasons: string[]): string {
  const shown = reasons.slice(0, 3).join("; ");
  return reasons.length > 3 ? `${shown}; and ${reasons.length - 3} more` : shown;
}
