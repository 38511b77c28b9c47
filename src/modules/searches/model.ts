import { t, type Static } from "elysia";
import { sortFields, TraceFilterSet } from "../traces/model";

export const SearchParams = t.Object({ projectSlug: t.String(), searchSlug: t.String() });

export const SavedSearch = t.Object({
  id: t.String(),
  organizationId: t.String(),
  projectId: t.String(),
  slug: t.String({ description: "Derived from the name; unique among the project's active searches" }),
  name: t.String(),
  query: t.Union([t.String(), t.Null()]),
  filters: TraceFilterSet,
  deletedAt: t.Union([t.String(), t.Null()]),
  createdAt: t.String(),
  updatedAt: t.String(),
});
export type SavedSearch = Static<typeof SavedSearch>;

const Name = t.String({ minLength: 1, maxLength: 128 });
const Query = t.Union([t.String({ maxLength: 500 }), t.Null()], { description: "Search over input and output messages; null for filter-only" });

export const CreateSavedSearchBody = t.Object({
  name: Name,
  query: t.Optional(Query),
  filters: t.Optional(TraceFilterSet),
});
export type CreateSavedSearchBody = Static<typeof CreateSavedSearchBody>;

export const UpdateSavedSearchBody = t.Object({
  name: t.Optional(Name),
  query: t.Optional(Query),
  filters: t.Optional(TraceFilterSet),
});
export type UpdateSavedSearchBody = Static<typeof UpdateSavedSearchBody>;

export const PaginatedSavedSearches = t.Object({ items: t.Array(SavedSearch), nextCursor: t.Null(), hasMore: t.Boolean() });

export const SearchTracesQuery = t.Object({
  cursor: t.Optional(t.String()),
  limit: t.Optional(t.Integer({ minimum: 1, maximum: 200 })),
  // Plain strings: Elysia would fill an absent enum query parameter with its first value.
  sortBy: t.Optional(t.String({ pattern: `^(${sortFields.join("|")})$`, description: sortFields.join(", ") })),
  sortDirection: t.Optional(t.String({ pattern: "^(asc|desc)$" })),
});
