-- Scores of every source, annotations included (source = 'annotation'): the one source of truth.
-- ClickHouse keeps a copy for trace filters and analytics, written through score_copy_outbox.
CREATE TABLE IF NOT EXISTS scores (
  id text PRIMARY KEY,
  organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  project_id text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  source text NOT NULL CHECK (source IN ('custom', 'evaluation', 'annotation')),
  source_id text NOT NULL CHECK (length(source_id) BETWEEN 1 AND 128),
  trace_id text,
  span_id text,
  session_id text CHECK (length(session_id) <= 128),
  simulation_id text,
  signal_id text,
  value double precision NOT NULL CHECK (value BETWEEN 0 AND 1),
  passed boolean NOT NULL,
  feedback text NOT NULL,
  error text CHECK (error <> ''),
  errored boolean GENERATED ALWAYS AS (error IS NOT NULL) STORED,
  duration bigint NOT NULL DEFAULT 0 CHECK (duration >= 0),
  tokens bigint NOT NULL DEFAULT 0 CHECK (tokens >= 0),
  cost bigint NOT NULL DEFAULT 0 CHECK (cost >= 0),
  metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
  annotator_id text REFERENCES users (id) ON DELETE SET NULL,
  drafted_at timestamptz,
  -- Soft delete: the row stays so the ClickHouse copy can be told, and rebuilt, with the deletion.
  deleted_at timestamptz,
  -- Bumped by every change; the ClickHouse copy keeps the highest version of each score.
  version bigint NOT NULL DEFAULT 1,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS scores_trace_idx ON scores (project_id, trace_id, created_at DESC, id DESC) WHERE deleted_at IS NULL;

-- Score ids whose ClickHouse copy is stale, written in the transaction that changed the score.
CREATE TABLE IF NOT EXISTS score_copy_outbox (
  id bigserial PRIMARY KEY,
  score_id text NOT NULL,
  enqueued_at timestamptz NOT NULL DEFAULT now()
);

-- Published failed scores (passed = false, not errored, with feedback) waiting for signal discovery.
CREATE TABLE IF NOT EXISTS failed_score_events (
  id bigserial PRIMARY KEY,
  score_id text NOT NULL UNIQUE REFERENCES scores (id) ON DELETE CASCADE,
  organization_id text NOT NULL,
  project_id text NOT NULL,
  recorded_at timestamptz NOT NULL DEFAULT now(),
  consumed_at timestamptz
);
CREATE INDEX IF NOT EXISTS failed_score_events_pending_idx ON failed_score_events (id) WHERE consumed_at IS NULL;
