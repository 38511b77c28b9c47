-- Saved searches: a named trace query and filter set of a project, addressed by a slug derived from
-- the name (unique among the project's active searches). Deletion is soft.
CREATE TABLE IF NOT EXISTS saved_searches (
  id text PRIMARY KEY,
  organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  project_id text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  slug text NOT NULL,
  name text NOT NULL,
  query text,
  filters jsonb NOT NULL DEFAULT '{}'::jsonb,
  deleted_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX IF NOT EXISTS saved_searches_active_slug_key ON saved_searches (project_id, slug) WHERE deleted_at IS NULL;
