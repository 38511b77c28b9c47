import type { Sql } from "../db/postgres";
import { badRequest, unauthorized, unavailable } from "../lib/errors";
import { attributeText } from "./attributes";
import { BackpressureError } from "./batch";
import { DecodeError, decodeJson, decodeProtobuf, type DecodedTraces } from "./decode";
import { mapResource, mapSpan } from "./map";
import { priceSpan } from "./price";
import type { OtlpBody } from "./receive";
import type { RedactionPolicies } from "./redaction-policy";
import type { AuthService } from "../modules/auth/service";
import type { ExportOutcome } from "./respond";
import type { SpanRow } from "./row";

/** Where rows go once mapped: resolves when they are durable. */
export interface SpanSink {
  accept(rows: readonly SpanRow[], approxBytes: number): Promise<void>;
}

export interface ExportCredentials {
  authorization: string | null;
  /** `X-Latitude-Project`: the project of spans that name none themselves. */
  project: string | null;
}

interface ProjectRef {
  id: string;
  hasFirstTrace: boolean;
}

const projectCacheMs = 10_000;
const PROJECT_ATTRIBUTE = "latitude.project";

/** receive → decode → map → redact → price → batch, shared by the HTTP and gRPC receivers. */
export class IngestPipeline {
  private projects = new Map<string, { ref: ProjectRef | null; expiresAt: number }>();

  constructor(
    private readonly auth: AuthService,
    private readonly sql: Sql,
    private readonly policies: RedactionPolicies,
    private readonly sink: SpanSink,
  ) {}

  async export(body: OtlpBody, credentials: ExportCredentials): Promise<ExportOutcome> {
    const principal = await this.auth.fromHeader(credentials.authorization);
    if (principal.kind !== "api_key" || !principal.apiKeyId) throw unauthorized("Ingest accepts API keys only");
    const decoded = decode(body);
    const rejections = decoded.rejected.map((rejected) => rejected.reason);
    const rows: SpanRow[] = [];
    const redactors = new Map<string, ReturnType<RedactionPolicies["forProject"]>>();
    const newProjects = new Set<ProjectRef>();

    for (const resourceSpans of decoded.resourceSpans) {
      const resource = mapResource(resourceSpans.resource);
      const resourceProject = attributeText(resourceSpans.resource.get(PROJECT_ATTRIBUTE)) || credentials.project || "";
      for (const { scope, spans } of resourceSpans.scopeSpans) {
        for (const span of spans) {
          const reference = attributeText(span.attributes.get(PROJECT_ATTRIBUTE)) || resourceProject;
          if (!reference) {
            rejections.push(`span ${span.spanId}: no project (set ${PROJECT_ATTRIBUTE} or X-Latitude-Project)`);
            continue;
          }
          const project = await this.project(principal.organizationId, reference);
          if (!project) {
            rejections.push(`span ${span.spanId}: unknown project "${reference}"`);
            continue;
          }
          if (!project.hasFirstTrace) newProjects.add(project);
          if (!redactors.has(project.id)) redactors.set(project.id, this.policies.forProject(principal.organizationId, project.id));
          rows.push(mapSpan(span, resource, scope, { organizationId: principal.organizationId, projectId: project.id, apiKeyId: principal.apiKeyId }));
        }
      }
    }
    if (rows.length === 0) throw badRequest(rejections.length ? `All spans rejected: ${summarize(rejections)}` : "No spans in request");

    for (const row of rows) {
      const redactor = await redactors.get(row.project_id)!;
      if (!redactor.isNoop) redactor.redactRow(row);
      priceSpan(row);
    }
    try {
      await this.sink.accept(rows, body.bytes.byteLength);
    } catch (error) {
      if (error instanceof BackpressureError) throw unavailable(error.retryAfterSeconds, "Ingest is saturated, retry later");
      throw error;
    }
    for (const project of newProjects) await this.markFirstTrace(project);
    return { rejectedSpans: rejections.length, errorMessage: rejections.length ? summarize(rejections) : "" };
  }

  /** A project named by slug or id within the organization; null when there is none. */
  private async project(organizationId: string, reference: string): Promise<ProjectRef | null> {
    const key = `${organizationId}\u0000${reference}`;
    const now = Date.now();
    const cached = this.projects.get(key);
    if (cached && cached.expiresAt > now) return cached.ref;
    const [row] = await this.sql<{ id: string; first_trace_at: Date | null }[]>`
      SELECT id, first_trace_at FROM projects
      WHERE organization_id = ${organizationId} AND deleted_at IS NULL AND (id = ${reference} OR slug = ${reference})
      ORDER BY (id = ${reference}) DESC LIMIT 1`;
    const ref = row ? { id: row.id, hasFirstTrace: row.first_trace_at !== null } : null;
    if (this.projects.size > 50_000) this.projects.clear();
    this.projects.set(key, { ref, expiresAt: now + projectCacheMs });
    return ref;
  }

  private async markFirstTrace(project: ProjectRef) {
    project.hasFirstTrace = true;
    await this.sql`UPDATE projects SET first_trace_at = now() WHERE id = ${project.id} AND first_trace_at IS NULL`;
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

function summarize(reasons: string[]): string {
  const shown = reasons.slice(0, 3).join("; ");
  return reasons.length > 3 ? `${shown}; and ${reasons.length - 3} more` : shown;
}
