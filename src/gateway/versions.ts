import type { Queryable, Sql } from "../db/postgres";
import { badRequest, notFound } from "../lib/errors";
import { insertProject } from "../modules/projects/service";
import type { IngestPipeline } from "../ingest/pipeline";
import { GatewayError } from "./errors";

/** A Vigil project as the gateway client sees it: numeric ids. */
export interface GatewayProject {
  id: number;
  name: string;
  workspaceId: number;
  createdAt: string;
  updatedAt: string;
  lastEditedAt: string;
  deletedAt: string | null;
}

/** A version (commit): a draft, or live once published with a version number. */
export interface Version {
  id: number;
  uuid: string;
  title: string;
  description: string | null;
  projectId: number;
  version: number | null;
  userId: string | null;
  mergedAt: string | null;
  deletedAt: string | null;
  createdAt: string;
  updatedAt: string;
}

/** A project the gateway addresses, with its Vigil and numeric ids. */
export interface ProjectRef {
  id: string;
  organizationId: string;
  gatewayId: number;
}

/** A version row with what routes need beyond the client's shape. */
export interface VersionRef extends Version {
  rowId: number;
  project: ProjectRef;
}

interface VersionRow {
  id: string;
  uuid: string;
  title: string;
  description: string | null;
  version: number | null;
  user_id: string | null;
  merged_at: Date | null;
  deleted_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

const iso = (date: Date | null) => (date ? date.toISOString() : null);
const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const LIVE = "live";

function toVersion(row: VersionRow, project: ProjectRef): VersionRef {
  return {
    id: Number(row.id),
    uuid: row.uuid,
    title: row.title,
    description: row.description,
    projectId: project.gatewayId,
    version: row.version,
    userId: row.user_id,
    mergedAt: iso(row.merged_at),
    deletedAt: iso(row.deleted_at),
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
    rowId: Number(row.id),
    project,
  };
}

/** The client's shape of a version, without the routing fields. */
export const presentVersion = ({ rowId: _rowId, project: _project, ...version }: VersionRef): Version => version;

/** Projects and their versions: drafts start as a copy of live; publishing makes a draft the new live. */
export class VersionsService {
  constructor(
    private sql: Sql,
    private ingest: IngestPipeline,
  ) {}

  async listProjects(organizationId: string): Promise<GatewayProject[]> {
    const rows = await this.sql<{ name: string; gateway_id: string; org_gateway_id: string; created_at: Date; updated_at: Date; last_edited_at: Date }[]>`
      SELECT p.name, p.gateway_id, o.gateway_id AS org_gateway_id, p.created_at, p.updated_at, p.last_edited_at
      FROM projects p JOIN organizations o ON o.id = p.organization_id
      WHERE p.organization_id = ${organizationId} AND p.deleted_at IS NULL ORDER BY p.created_at, p.id`;
    return rows.map((row) => ({
      id: Number(row.gateway_id),
      name: row.name,
      workspaceId: Number(row.org_gateway_id),
      createdAt: row.created_at.toISOString(),
      updatedAt: row.updated_at.toISOString(),
      lastEditedAt: row.last_edited_at.toISOString(),
      deletedAt: null,
    }));
  }

  /** A new Vigil project with an empty live version and a first draft on top of it. */
  async createProject(organizationId: string, name: string, userId: string | null): Promise<{ project: GatewayProject; version: Version }> {
    if (typeof name !== "string") throw badRequest("name: is required");
    const created = await this.sql.begin(async (tx) => {
      const project = await insertProject(tx, organizationId, name);
      const ref = await this.project(tx, organizationId, project.id);
      const version = await this.createDraft(tx, ref, "Initial draft", userId);
      return { ref, version };
    });
    this.ingest.forgetProjects(organizationId);
    const project = (await this.listProjects(organizationId)).find((p) => p.id === created.ref.gatewayId)!;
    return { project, version: presentVersion(created.version) };
  }

  /** A project by numeric gateway id (or Vigil id or slug) within the organization; 404 otherwise. */
  async project(sql: Queryable, organizationId: string, reference: string): Promise<ProjectRef> {
    const numeric = /^\d{1,15}$/.test(reference) ? Number(reference) : -1;
    const [row] = await sql<{ id: string; gateway_id: string }[]>`
      SELECT id, gateway_id FROM projects
      WHERE organization_id = ${organizationId} AND deleted_at IS NULL AND (gateway_id = ${numeric} OR id = ${reference} OR slug = ${reference})
      ORDER BY gateway_id = ${numeric} DESC LIMIT 1`;
    if (!row) throw notFound("Project");
    return { id: row.id, organizationId, gatewayId: Number(row.gateway_id) };
  }

  async list(organizationId: string, projectReference: string): Promise<Version[]> {
    const project = await this.project(this.sql, organizationId, projectReference);
    await this.ensureLive(this.sql, project);
    const rows = await this.sql<VersionRow[]>`SELECT * FROM gateway_versions WHERE project_id = ${project.id} AND deleted_at IS NULL ORDER BY id`;
    return rows.map((row) => presentVersion(toVersion(row, project)));
  }

  /** `live` (the published head) or a version uuid of the project; 404 otherwise. */
  async resolve(sql: Queryable, organizationId: string, projectReference: string, versionUuid: string): Promise<VersionRef> {
    const project = await this.project(sql, organizationId, projectReference);
    if (versionUuid === LIVE) return this.ensureLive(sql, project);
    if (!uuidPattern.test(versionUuid)) throw notFound("Version");
    const [row] = await sql<VersionRow[]>`SELECT * FROM gateway_versions WHERE project_id = ${project.id} AND uuid = ${versionUuid} AND deleted_at IS NULL`;
    if (!row) throw notFound("Version");
    return toVersion(row, project);
  }

  /** A version by uuid alone, within the organization (conversations refer to theirs so). */
  async byUuid(organizationId: string, versionUuid: string): Promise<VersionRef> {
    const [row] = await this.sql<(VersionRow & { project_id: string; gateway_id: string })[]>`
      SELECT v.*, p.gateway_id FROM gateway_versions v JOIN projects p ON p.id = v.project_id
      WHERE v.organization_id = ${organizationId} AND v.uuid = ${versionUuid}`;
    if (!row) throw notFound("Version");
    return toVersion(row, { id: row.project_id, organizationId, gatewayId: Number(row.gateway_id) });
  }

  async create(organizationId: string, projectReference: string, name: string, userId: string | null): Promise<Version> {
    if (typeof name !== "string" || !name.trim()) throw badRequest("name: is required");
    return this.sql.begin(async (tx) => presentVersion(await this.createDraft(tx, await this.project(tx, organizationId, projectReference), name.trim(), userId)));
  }

  /** Publishes a draft: it becomes live with the next version number. */
  async publish(organizationId: string, projectReference: string, versionUuid: string, body: { title?: string; description?: string }): Promise<Version> {
    return this.sql.begin(async (tx) => presentVersion(await this.publishIn(tx, await this.resolve(tx, organizationId, projectReference, versionUuid), body)));
  }

  async publishIn(tx: Queryable, version: VersionRef, body: { title?: string; description?: string }): Promise<VersionRef> {
    if (version.mergedAt) throw new GatewayError(400, "BadRequestError", "BadRequestError", "Only a draft version can be published");
    // One publisher per project at a time, so version numbers never collide.
    await tx`SELECT 1 FROM projects WHERE id = ${version.project.id} FOR UPDATE`;
    const [row] = await tx<VersionRow[]>`
      UPDATE gateway_versions SET
        version = (SELECT coalesce(max(version), 0) + 1 FROM gateway_versions WHERE project_id = ${version.project.id}),
        merged_at = now(), updated_at = now(),
        title = coalesce(${body.title ?? null}, title), description = coalesce(${body.description ?? null}, description)
      WHERE id = ${version.rowId} RETURNING *`;
    return toVersion(row!, version.project);
  }

  /** A draft holding a copy of live's documents. */
  async createDraft(tx: Queryable, project: ProjectRef, title: string, userId: string | null): Promise<VersionRef> {
    const live = await this.ensureLive(tx, project);
    const [row] = await tx<VersionRow[]>`
      INSERT INTO gateway_versions (uuid, organization_id, project_id, title, user_id)
      VALUES (${crypto.randomUUID()}, ${project.organizationId}, ${project.id}, ${title}, ${userId}) RETURNING *`;
    await tx`
      INSERT INTO gateway_documents (version_id, path, document_uuid, content, content_hash)
      SELECT ${row!.id}, path, document_uuid, content, content_hash FROM gateway_documents WHERE version_id = ${live.rowId} AND deleted_at IS NULL`;
    return toVersion(row!, project);
  }

  /** The project's live version; every project has one (empty at first), made on first use. */
  private async ensureLive(sql: Queryable, project: ProjectRef): Promise<VersionRef> {
    const select = () => sql<VersionRow[]>`
      SELECT * FROM gateway_versions WHERE project_id = ${project.id} AND merged_at IS NOT NULL AND deleted_at IS NULL ORDER BY version DESC LIMIT 1`;
    let [row] = await select();
    if (!row) {
      await sql`
        INSERT INTO gateway_versions (uuid, organization_id, project_id, title, version, merged_at)
        VALUES (${crypto.randomUUID()}, ${project.organizationId}, ${project.id}, 'Initial version', 1, now())
        ON CONFLICT (project_id, version) DO NOTHING`;
      [row] = await select();
    }
    return toVersion(row!, project);
  }
}
