-- CSV exports of traces: the request, its background job state (claimed with FOR UPDATE SKIP LOCKED,
-- so several Vigil processes share the queue) and the download link's secret, stored hashed.
CREATE TABLE IF NOT EXISTS trace_exports (
  id text PRIMARY KEY,
  organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  project_id text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  recipient text NOT NULL,
  -- {by: "ids", ids} or {by: "filters", filters}, as requested.
  selection jsonb NOT NULL,
  status text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'running', 'done', 'failed')),
  attempts integer NOT NULL DEFAULT 0,
  run_after timestamptz NOT NULL DEFAULT now(),
  -- A running job whose lock expired belongs to a process that died; another may take it over.
  locked_until timestamptz,
  token_hash text,
  file_name text,
  row_count bigint,
  error text,
  expires_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  finished_at timestamptz
);
CREATE INDEX IF NOT EXISTS trace_exports_pending_idx ON trace_exports (created_at) WHERE status IN ('queued', 'running');
CREATE INDEX IF NOT EXISTS trace_exports_expiry_idx ON trace_exports (expires_at) WHERE file_name IS NOT NULL;
