import type { Queryable } from "../../db/postgres";
import { badRequest, notFound } from "../../lib/errors";
import { newId, slugify } from "../../lib/ids";
import { withFreeSlug } from "../../lib/slugs";
import type { ProjectRef } from "../traces/service";
import { validateTraceFilters, type FilterSet } from "../traces/filters";
import type { CreateSavedSearchBody, SavedSearch, UpdateSavedSearchBody } from "./model";

interface SavedSearchRow {
  id: string;
  organization_id: string;
  project_id: string;
  slug: string;
  name: string;
  query: string | null;
  filters: FilterSet;
  deleted_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

const toSavedSearch = (row: SavedSearchRow): SavedSearch => ({
  id: row.id,
  organizationId: row.organization_id,
  projectId: row.project_id,
  slug: row.slug,
  name: row.name,
  query: row.query,
  filters: row.filters as SavedSearch["filters"],
  deletedAt: row.deleted_at?.toISOString() ?? null,
  createdAt: row.created_at.toISOString(),
  updatedAt: row.updated_at.toISOString(),
});

const slugConstraint = "saved_searches_active_slug_key";

/** A search needs a query or at least one filter; filters are checked like the trace list's. */
function checkedDefinition(query: string | null, filters: FilterSet): { query: string | null; filters: FilterSet } {
  const trimmed = query?.trim() ? query : null;
  validateTraceFilters(filters);
  if (trimmed === null && Object.keys(filters).length === 0) throw badRequest("At least one of query or filters must be set");
  return { query: trimmed, filters };
}

/** Saved searches of a project, addressed by slug (an id is accepted too). */
export class SavedSearches {
  constructor(private readonly sql: Queryable) {}

  async list(project: ProjectRef): Promise<SavedSearch[]> {
    const rows = await this.sql<SavedSearchRow[]>`
      SELECT * FROM saved_searches WHERE project_id = ${project.id} AND organization_id = ${project.organizationId} AND deleted_at IS NULL
      ORDER BY created_at, id`;
    return rows.map(toSavedSearch);
  }

  private async row(project: ProjectRef, slugOrId: string): Promise<SavedSearchRow> {
    const [row] = await this.sql<SavedSearchRow[]>`
      SELECT * FROM saved_searches
      WHERE project_id = ${project.id} AND organization_id = ${project.organizationId} AND deleted_at IS NULL AND (slug = ${slugOrId} OR id = ${slugOrId})
      ORDER BY id = ${slugOrId} DESC LIMIT 1`;
    if (!row) throw notFound("Saved search");
    return row;
  }

  async get(project: ProjectRef, slugOrId: string): Promise<SavedSearch> {
    return toSavedSearch(await this.row(project, slugOrId));
  }

  async create(project: ProjectRef, body: CreateSavedSearchBody): Promise<SavedSearch> {
    const name = body.name.trim();
    if (!name) throw badRequest("name: must not be empty");
    const { query, filters } = checkedDefinition(body.query ?? null, body.filters ?? {});
    return withFreeSlug(slugify(name, "search"), slugConstraint, async (slug) => {
      const [row] = await this.sql<SavedSearchRow[]>`
        INSERT INTO saved_searches (id, organization_id, project_id, slug, name, query, filters)
        VALUES (${newId()}, ${project.organizationId}, ${project.id}, ${slug}, ${name}, ${query}, ${this.sql.json(filters as never)})
        RETURNING *`;
      return toSavedSearch(row!);
    });
  }

  /** A rename changes the slug only when the slug form of the name changes (not for capitalization). */
  async update(project: ProjectRef, slugOrId: string, body: UpdateSavedSearchBody): Promise<SavedSearch> {
    const current = await this.row(project, slugOrId);
    const name = body.name === undefined ? current.name : body.name.trim();
    if (!name) throw badRequest("name: must not be empty");
    const { query, filters } = checkedDefinition(body.query === undefined ? current.query : body.query, body.filters ?? current.filters);
    const base = slugify(name, "search");
    const keepSlug = base === slugify(current.name, "search");
    return withFreeSlug(keepSlug ? current.slug : base, slugConstraint, async (slug) => {
      const [row] = await this.sql<SavedSearchRow[]>`
        UPDATE saved_searches SET name = ${name}, slug = ${keepSlug ? current.slug : slug}, query = ${query},
          filters = ${this.sql.json(filters as never)}, updated_at = now()
        WHERE id = ${current.id} RETURNING *`;
      return toSavedSearch(row!);
    });
  }

  async remove(project: ProjectRef, slugOrId: string): Promise<void> {
    const current = await this.row(project, slugOrId);
    await this.sql`UPDATE saved_searches SET deleted_at = now(), updated_at = now() WHERE id = ${current.id}`;
  }
}
