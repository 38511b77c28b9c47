-- Signals (also called issues): failures grouped by discovery, flagger annotations and custom signals.
-- Lifecycle columns hold only what a person set (resolve, ignore, mute) or what a recurrence did
-- (regressed_at); the read states are derived (src/modules/signals/states.ts).
CREATE TABLE IF NOT EXISTS signals (
  id text PRIMARY KEY,
  organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  project_id text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  slug text NOT NULL,
  name text NOT NULL,
  description text NOT NULL DEFAULT '',
  source text NOT NULL CHECK (source IN ('annotation', 'flagger', 'custom')),
  priority text CHECK (priority IN ('low', 'medium', 'high', 'urgent')),
  -- Discovered from evaluation or custom scores: visible once it has 3 members; null while pending.
  visible_at timestamptz,
  member_count integer NOT NULL DEFAULT 0,
  -- Running time-decayed weighted sum of the members' normalized embeddings, as of centroid_at.
  centroid real[],
  centroid_at timestamptz,
  named_at timestamptz,
  resolved_at timestamptz,
  ignored_at timestamptz,
  muted_at timestamptz,
  regressed_at timestamptz,
  -- false: resolving stops the signal's evaluations (ResolveSignalsBody.keepMonitoring).
  keep_monitoring boolean NOT NULL DEFAULT true,
  -- SubmitSignalFeedbackBody verdict: {value, passed, feedback}.
  feedback jsonb,
  deleted_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX IF NOT EXISTS signals_slug_key ON signals (project_id, slug) WHERE deleted_at IS NULL;
CREATE INDEX IF NOT EXISTS signals_project_idx ON signals (project_id, created_at) WHERE deleted_at IS NULL;

-- A score linked to a signal by discovery, with what it added to the centroid, so a retraction can
-- take exactly that weight out again. scores.signal_id mirrors signal_id for reads.
CREATE TABLE IF NOT EXISTS signal_members (
  score_id text PRIMARY KEY REFERENCES scores (id) ON DELETE CASCADE,
  signal_id text NOT NULL REFERENCES signals (id) ON DELETE CASCADE,
  weight real NOT NULL,
  embedding real[] NOT NULL,
  linked_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS signal_members_signal_idx ON signal_members (signal_id, linked_at);
CREATE INDEX IF NOT EXISTS scores_signal_idx ON scores (signal_id, created_at) WHERE signal_id IS NOT NULL AND deleted_at IS NULL;
CREATE INDEX IF NOT EXISTS scores_source_id_idx ON scores (project_id, source, source_id, trace_id) WHERE deleted_at IS NULL;

-- A signal's detector (custom signals: rule or judge; monitoring of discovered signals: judge).
CREATE TABLE IF NOT EXISTS evaluations (
  id text PRIMARY KEY,
  organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  project_id text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  signal_id text NOT NULL REFERENCES signals (id) ON DELETE CASCADE,
  name text NOT NULL,
  description text NOT NULL,
  settings jsonb NOT NULL,
  -- Row-local trace filters (CreateSignalBody.filters) gating which traces it runs on.
  filters jsonb,
  hash text NOT NULL,
  sampling integer NOT NULL DEFAULT 100 CHECK (sampling BETWEEN 0 AND 100),
  aligned_at timestamptz,
  archived_at timestamptz,
  deleted_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS evaluations_project_idx ON evaluations (project_id) WHERE archived_at IS NULL AND deleted_at IS NULL;
CREATE INDEX IF NOT EXISTS evaluations_signal_idx ON evaluations (signal_id);

-- Confusion matrix of an evaluation against human annotations on the same traces, kept up to date by
-- the writes on either side (src/modules/signals/alignment.ts).
CREATE TABLE IF NOT EXISTS evaluation_alignment (
  evaluation_id text PRIMARY KEY REFERENCES evaluations (id) ON DELETE CASCADE,
  true_positives integer NOT NULL DEFAULT 0,
  false_positives integer NOT NULL DEFAULT 0,
  true_negatives integer NOT NULL DEFAULT 0,
  false_negatives integer NOT NULL DEFAULT 0,
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- Which detector (flagger slug or `evaluation:<id>`) already flagged which trace: at most once each,
-- also when late spans make the trace quiet again.
CREATE TABLE IF NOT EXISTS trace_detector_runs (
  project_id text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  trace_id text NOT NULL,
  detector text NOT NULL,
  outcome text NOT NULL,
  score_id text,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (project_id, trace_id, detector)
);

-- Up to where the quiet-trace scan has looked (ClickHouse traces.last_ingested_at), fleet-wide.
CREATE TABLE IF NOT EXISTS quiet_trace_scan (
  id boolean PRIMARY KEY DEFAULT true CHECK (id),
  scanned_until timestamptz NOT NULL
);

-- A retracted event whose score discovery has taken out of its signal again.
ALTER TABLE failed_score_events ADD COLUMN IF NOT EXISTS unlinked_at timestamptz;
CREATE INDEX IF NOT EXISTS failed_score_events_retracted_idx ON failed_score_events (id) WHERE retracted_at IS NOT NULL AND unlinked_at IS NULL AND consumed_at IS NOT NULL;
