import type { Queryable, Sql } from "../../db/postgres";
import { badRequest, conflict, notFound } from "../../lib/errors";
import { newId, slugify } from "../../lib/ids";
import { cursorTimestamp, decodeCursor, pageLimit, toPage, type Page } from "../../lib/pagination";
import type { Principal } from "../auth/service";
import type { RedactionPolicies } from "../../ingest/redaction-policy";
import { flaggerSlugs, type FlaggersPatch, type Project, type ProjectSettings, type RedactionSetting, type UpdateProjectBody } from "./model";
import { isUniqueViolation, withFreeSlug } from "../../lib/slugs";

interface ProjectRow {
  id: string;
  organization_id: string;
  name: string;
  slug: string;
  settings: ProjectSettings | null;
  flaggers: FlaggersPatch;
  first_trace_at: Date | null;
  deleted_at: Date | null;
  last_edited_at: Date;
  created_at: Date;
  updated_at: Date;
}

const iso = (date: Date) => date.toISOString();
const isoOrNull = (date: Date | null) => (date ? date.toISOString() : null);

function toProject(row: ProjectRow): Project {
  return {
    id: row.id,
    organizationId: row.organization_id,
    name: row.name,
    slug: row.slug,
    settings: row.settings,
    flaggers: Object.fromEntries(flaggerSlugs.map((slug) => [slug, row.flaggers[slug] ?? true])) as Project["flaggers"],
    firstTraceAt: isoOrNull(row.first_trace_at),
    deletedAt: isoOrNull(row.deleted_at),
    lastEditedAt: iso(row.last_edited_at),
    createdAt: iso(row.created_at),
    updatedAt: iso(row.updated_at),
  };
}

function projectName(name: string): string {
  const trimmed = name.trim();
  if (!trimmed) throw badRequest("name: must not be blank");
  return trimmed;
}

const duplicateName = (name: string) => conflict(`name: a project named "${name}" already exists in this organization`);

/** The organization of an `/v1/organizations/{organizationId}/…` path: the credential's own, or 404. */
export function organizationFromPath(principal: Principal, organizationId: string): string {
  if (organizationId !== principal.organizationId) throw notFound("Organization");
  return organizationId;
}

// An id match wins over a slug match, should a slug ever spell another project's id.
const selectActiveProject = (sql: Queryable, organizationId: string, slugOrId: string) => sql`
  SELECT * FROM projects
  WHERE organization_id = ${organizationId} AND deleted_at IS NULL AND (id = ${slugOrId} OR slug = ${slugOrId})
  ORDER BY id = ${slugOrId} DESC
  LIMIT 1`;

/** An active project of the organization by id or slug; 404 when absent, deleted or another organization's. */
export async function findProject(sql: Queryable, organizationId: string, slugOrId: string): Promise<Project> {
  const [row] = await sql<ProjectRow[]>`${selectActiveProject(sql, organizationId, slugOrId)}`;
  if (!row) throw notFound("Project");
  return toProject(row);
}

/**
 * Inserts an active project, deriving a slug unique among the organization's active projects from
 * the name (with a random suffix when taken). A name already in use is a 409.
 */
export async function insertProject(sql: Queryable, organizationId: string, requestedName: string): Promise<Project> {
  const name = projectName(requestedName);
  return withFreeSlug(slugify(name), "projects_active_slug_key", async (slug) => {
    try {
      const [row] = await sql<ProjectRow[]>`
        INSERT INTO projects (id, organization_id, name, slug) VALUES (${newId()}, ${organizationId}, ${name}, ${slug})
        RETURNING *`;
      return toProject(row!);
    } catch (error) {
      if (isUniqueViolation(error, "projects_active_name_key")) throw duplicateName(name);
      throw error;
    }
  });
}

type JsonObject = Record<string, unknown>;
const isObject = (value: unknown): value is JsonObject => typeof value === "object" && value !== null && !Array.isArray(value);

function mergeObjects(stored: JsonObject, patch: JsonObject): JsonObject {
  const merged: JsonObject = { ...stored };
  for (const [key, value] of Object.entries(patch)) {
    merged[key] = isObject(value) && isObject(stored[key]) ? mergeObjects(stored[key], value) : value;
  }
  return merged;
}

/** Patch semantics of project settings: sent fields replace stored ones, nested objects merge, arrays replace. */
const mergeSettings = (stored: ProjectSettings, patch: ProjectSettings): ProjectSettings => mergeObjects(stored, patch);

export interface OrganizationRedaction {
  /** Organization-wide redaction; overrides project values, or replaces them entirely when locked. */
  policy: RedactionSetting | null;
  locked: boolean;
}

export async function getOrganizationRedaction(sql: Queryable, organizationId: string): Promise<OrganizationRedaction> {
  const [row] = await sql<{ redaction_policy: RedactionSetting | null; redaction_locked: boolean }[]>`
    SELECT redaction_policy, redaction_locked FROM organizations WHERE id = ${organizationId}`;
  if (!row) throw notFound("Organization");
  return { policy: row.redaction_policy, locked: row.redaction_locked };
}

export async function setOrganizationRedaction(sql: Queryable, organizationId: string, redaction: OrganizationRedaction): Promise<OrganizationRedaction> {
  const [row] = await sql<{ redaction_policy: RedactionSetting | null; redaction_locked: boolean }[]>`
    UPDATE organizations
    SET redaction_policy = ${redaction.policy ? sql.json(redaction.policy) : null}, redaction_locked = ${redaction.locked}, updated_at = now()
    WHERE id = ${organizationId}
    RETURNING redaction_policy, redaction_locked`;
  if (!row) throw notFound("Organization");
  return { policy: row.redaction_policy, locked: row.redaction_locked };
}

/** What ingest caches about projects: told when it goes stale in this process. */
interface IngestCaches {
  redaction: Pick<RedactionPolicies, "invalidate">;
  ingest: { forgetProjects(organizationId: string): void };
}

/** One field of each flagger's patch (a bare boolean is `enabled`), for slugs that set it. */
function flaggerSwitches(patch: FlaggersPatch | undefined, field: "enabled" | "sampling"): Record<string, boolean | number> {
  return Object.fromEntries(
    Object.entries(patch ?? {}).flatMap(([slug, value]) => {
      const set = typeof value === "boolean" ? { enabled: value } : (value ?? {});
      return set[field] === undefined ? [] : [[slug, set[field]]];
    }),
  );
}

export class ProjectsService {
  constructor(
    private sql: Sql,
    private caches: IngestCaches,
  ) {}

  async create(organizationId: string, name: string): Promise<Project> {
    const project = await insertProject(this.sql, organizationId, name);
    this.caches.ingest.forgetProjects(organizationId);
    return project;
  }

  get(organizationId: string, slugOrId: string): Promise<Project> {
    return findProject(this.sql, organizationId, slugOrId);
  }

  /**
   * Active projects, oldest first, keyset-paginated on (created_at, id). The cursor keeps created_at
   * to the microsecond, as text: postgres.js would round a timestamp parameter to milliseconds.
   */
  async list(organizationId: string, query: { cursor?: string; limit?: number }): Promise<Page<Project>> {
    const limit = pageLimit(query.limit);
    const after = query.cursor ? decodeCursor(query.cursor, 2) : null;
    if (after) cursorTimestamp(after[0]!);
    const rows = await this.sql<(ProjectRow & { created_at_key: string })[]>`
      SELECT *, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS created_at_key
      FROM projects
      WHERE organization_id = ${organizationId} AND deleted_at IS NULL
        ${after ? this.sql`AND (created_at, id) > (${after[0]!}::text::timestamptz, ${after[1]!})` : this.sql``}
      ORDER BY created_at, id
      LIMIT ${limit + 1}`;
    return toPage(rows, limit, toProject, (row) => [row.created_at_key, row.id]);
  }

  async update(organizationId: string, slugOrId: string, patch: UpdateProjectBody): Promise<Project> {
    const { settings, flaggers } = patch;
    const name = patch.name === undefined ? undefined : projectName(patch.name);
    if (name === undefined && settings === undefined && flaggers === undefined) return this.get(organizationId, slugOrId);
    try {
      const project = await this.sql.begin(async (tx) => {
        const [current] = await tx<ProjectRow[]>`${selectActiveProject(tx, organizationId, slugOrId)} FOR UPDATE`;
        if (!current) throw notFound("Project");
        const mergedSettings = settings === undefined ? current.settings : mergeSettings(current.settings ?? {}, settings);
        const edited = name !== undefined || settings !== undefined;
        const [row] = await tx<ProjectRow[]>`
          UPDATE projects SET
            name = ${name ?? current.name},
            settings = ${mergedSettings ? tx.json(mergedSettings) : null},
            flaggers = flaggers || ${tx.json(flaggerSwitches(flaggers, "enabled"))},
            flagger_sampling = flagger_sampling || ${tx.json(flaggerSwitches(flaggers, "sampling"))},
            last_edited_at = ${edited ? tx`now()` : tx`last_edited_at`},
            updated_at = now()
          WHERE id = ${current.id} AND organization_id = ${organizationId}
          RETURNING *`;
        return toProject(row!);
      });
      if (settings !== undefined) this.caches.redaction.invalidate(organizationId, project.id);
      return project;
    } catch (error) {
      if (isUniqueViolation(error, "projects_active_name_key")) throw duplicateName(name!);
      throw error;
    }
  }

  async remove(organizationId: string, slugOrId: string): Promise<void> {
    const project = await findProject(this.sql, organizationId, slugOrId);
    const result = await this.sql`
      UPDATE projects SET deleted_at = now(), updated_at = now()
      WHERE id = ${project.id} AND organization_id = ${organizationId} AND deleted_at IS NULL`;
    if (result.count === 0) throw notFound("Project");
    this.caches.ingest.forgetProjects(organizationId);
  }

  organizationRedaction(organizationId: string): Promise<OrganizationRedaction> {
    return getOrganizationRedaction(this.sql, organizationId);
  }

  /** Replaces the organization's policy; the next export of any of its projects is redacted by it. */
  async setOrganizationRedaction(organizationId: string, redaction: OrganizationRedaction): Promise<OrganizationRedaction> {
    const stored = await setOrganizationRedaction(this.sql, organizationId, redaction);
    this.caches.redaction.invalidate(organizationId);
    return stored;
  }
}
