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

/** Where rows go once mapped: `accept` resolves when they are durable; both throw BackpressureError when full. */
export interface SpanSink {
  admit(approxBytes: number): void;
  accept(rows: readonly SpanRow[], approxBytes: number): Promise<void>;
}

export interface ExportRequest {
  authorization: string | null;
  /** `X-Latitude-Project`: the project of spans that name none themselves. */
  project: string | null;
  /** The body's size as announced before it is read (Content-Length), 0 when unknown. */
  announcedBytes: number;
}

interface ProjectRef {
  id: string;
  hasFirstTrace: boolean;
}

const projectCacheMs = 10_000;
const unknownProjectCacheMs = 1_000;
const PROJECT_ATTRIBUTE = "latitude.project";

/** receive → decode → map → redact → price → batch, shared by the HTTP and gRPC receivers. */
export class IngestPipeline {
  private projects = new Map<string, Map<string, { ref: ProjectRef | null; expiresAt: number }>>();
  /** Exports admitted and not answered yet. */
  private inFlight = 0;

  constructor(
    private readonly auth: AuthService,
    private readonly sql: Sql,
    private readonly policies: RedactionPolicies,
    private readonly sink: SpanSink,
    /**
     * Exports decoded at once. Decoding and mapping are CPU-bound, so past a few dozen more concurrency
     * only queues work and memory: beyond it senders get a 503 at once and back off.
     */
    private readonly maxConcurrentExports: number,
    private readonly log: Logger,
  ) {}

  /**
   * Runs one export. The credential is checked and the writer asked for room before the body is read, so
   * neither an unauthenticated sender nor a saturated writer costs a decompression or a decode.
   */
  async export(request: ExportRequest, readBody: () => Promise<OtlpBody>): Promise<ExportOutcome> {
    const principal = await this.auth.fromHeader(request.authorization);
    if (principal.kind !== "api_key" || !principal.apiKeyId) throw unauthorized("Ingest accepts API keys only");
    const owner = { organizationId: principal.organizationId, apiKeyId: principal.apiKeyId };
    try {
      this.sink.admit(request.announcedBytes);
    } catch (error) {
      throw saturated(error);
    }
    if (this.inFlight >= this.maxConcurrentExports) throw saturated(new BackpressureError("busy", 1));
    this.inFlight++;
    try {
      return await this.run(owner, request, await readBody());
    } finally {
      this.inFlight--;
    }
  }

  /**
   * Spans Vigil makes itself (prompt gateway runs) on behalf of an API key: the same decode → map →
   * redact → price → write path as an export from that key, without the credential round trip.
   */
  async exportAs(owner: Omit<SpanOwner, "projectId">, body: OtlpBody): Promise<ExportOutcome> {
    try {
      this.sink.admit(body.bytes.byteLength);
    } catch (error) {
      throw saturated(error);
    }
    return this.run(owner, { authorization: null, project: null, announcedBytes: body.bytes.byteLength }, body);
  }

  private async run(owner: Omit<SpanOwner, "projectId">, request: ExportRequest, body: OtlpBody): Promise<ExportOutcome> {
    const decoded = decode(body);
    const rejections = decoded.rejected.map((rejected) => rejected.reason);
    const rows: SpanRow[] = [];
    // Per export, each project reference is resolved once, and each project's redactor fetched once.
    const projects = new Map<string, ProjectRef | null>();
    const redactors = new Map<string, SpanRedactor>();

    for (const resourceSpans of decoded.resourceSpans) {
      const resource = mapResource(resourceSpans.resource);
      const resourceProject = attributeText(resourceSpans.resource.get(PROJECT_ATTRIBUTE)) || request.project || "";
      for (const { scope, spans } of resourceSpans.scopeSpans) {
        for (const span of spans) {
          const reference = attributeText(span.attributes.get(PROJECT_ATTRIBUTE)) || resourceProject;
          if (!reference) {
            rejections.push(`span ${span.spanId}: no project (set ${PROJECT_ATTRIBUTE} or X-Latitude-Project)`);
            continue;
          }
          let project = projects.get(reference);
          if (project === undefined) {
            project = await this.project(owner.organizationId, reference);
            projects.set(reference, project);
            if (project && !redactors.has(project.id)) redactors.set(project.id, await this.policies.forProject(owner.organizationId, project.id));
          }
          if (!project) {
            rejections.push(`span ${span.spanId}: unknown project "${reference}"`);
            continue;
          }
          const row = mapSpan(span, resource, scope, { ...owner, projectId: project.id });
          const redactor = redactors.get(project.id)!;
          if (!redactor.isNoop) redactor.redactRow(row);
          rows.push(priceSpan(row));
        }
      }
    }
    // An empty request is a successful no-op, as for the OpenTelemetry Collector.
    if (rows.length === 0 && rejections.length === 0) return { rejectedSpans: 0, errorMessage: "" };
    if (rows.length === 0) throw badRequest(`All spans rejected: ${summarize(rejections)}`);

    await this.sink.accept(rows, body.bytes.byteLength).catch((error) => {
      throw saturated(error);
    });
    for (const project of projects.values()) if (project && !project.hasFirstTrace) await this.markFirstTrace(project);
    return { rejectedSpans: rejections.length, errorMessage: rejections.length ? summarize(rejections) : "" };
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

/** A full writer is a 503 with its Retry-After; any other error passes through. */
function saturated(error: unknown): unknown {
  return error instanceof BackpressureError ? unavailable(error.retryAfterSeconds, "Ingest is saturated, retry later") : error;
}

function summarize(reasons: string[]): string {
  const shown = reasons.slice(0, 3).join("; ");
  return reasons.length > 3 ? `${shown}; and ${reasons.length - 3} more` : shown;
}
