-- Monitors watch a target (saved search, tool, user, session) with one rule; incidents are what they
-- (and signal escalation) open. `next_evaluation_at` is the fleet-wide claim: an evaluation takes a
-- monitor by moving it forward in one UPDATE, so each monitor is evaluated once per tick.
CREATE TABLE IF NOT EXISTS monitors (
  id text PRIMARY KEY,
  organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  project_id text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  slug text NOT NULL,
  name text NOT NULL,
  description text NOT NULL DEFAULT '',
  -- System monitors: 'signal.new', 'signal.regressed', 'signal.escalating'; null for user monitors.
  system_kind text,
  target jsonb NOT NULL,
  trigger text NOT NULL CHECK (trigger IN ('match', 'threshold', 'escalating')),
  severity text NOT NULL CHECK (severity IN ('low', 'medium', 'high', 'urgent')),
  config jsonb NOT NULL,
  -- Evaluation memory: match watermark, detector state, cached baseline.
  state jsonb NOT NULL DEFAULT '{}'::jsonb,
  next_evaluation_at timestamptz NOT NULL DEFAULT now(),
  muted_at timestamptz,
  deleted_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX IF NOT EXISTS monitors_active_slug_key ON monitors (project_id, slug) WHERE deleted_at IS NULL;
CREATE UNIQUE INDEX IF NOT EXISTS monitors_system_key ON monitors (project_id, system_kind) WHERE system_kind IS NOT NULL AND deleted_at IS NULL;
CREATE INDEX IF NOT EXISTS monitors_due_idx ON monitors (next_evaluation_at) WHERE deleted_at IS NULL;

CREATE TABLE IF NOT EXISTS incidents (
  id text PRIMARY KEY,
  organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  project_id text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  source_type text NOT NULL CHECK (source_type IN ('monitor', 'signal')),
  source_id text NOT NULL,
  -- 'monitor.match' | 'monitor.threshold' | 'monitor.escalating' | 'signal.new' | 'signal.regressed' | 'signal.escalating'
  kind text NOT NULL,
  -- What a match incident is about (a trace id); null for sustained incidents.
  item_key text,
  severity text NOT NULL CHECK (severity IN ('low', 'medium', 'high', 'urgent')),
  condition jsonb,
  -- The numbers that tripped it, shown in notifications.
  details jsonb NOT NULL DEFAULT '{}'::jsonb,
  started_at timestamptz NOT NULL,
  ended_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  -- Notification of the opening and closing: 'pending', 'sent' or 'silent' (muted, switched off).
  open_notice text NOT NULL DEFAULT 'pending',
  close_notice text,
  notified boolean NOT NULL DEFAULT false,
  mail_message_id text
);
-- At most one open sustained incident per source and kind, and one incident per matched item:
-- concurrent evaluators insert ON CONFLICT DO NOTHING and open each incident once.
CREATE UNIQUE INDEX IF NOT EXISTS incidents_one_open_key ON incidents (source_type, source_id, kind) WHERE ended_at IS NULL AND item_key IS NULL;
CREATE UNIQUE INDEX IF NOT EXISTS incidents_item_key ON incidents (source_type, source_id, item_key) WHERE item_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS incidents_project_time_idx ON incidents (project_id, started_at);
CREATE INDEX IF NOT EXISTS incidents_source_idx ON incidents (source_id, started_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS incidents_open_notice_idx ON incidents (created_at) WHERE open_notice = 'pending' OR close_notice = 'pending';

-- One webhook per project: incidents are POSTed to `url`, signed with HMAC-SHA256 under `secret`
-- (kept as is: the server must sign with it). Quarantined after a delivery exhausts its retries.
CREATE TABLE IF NOT EXISTS project_webhooks (
  project_id text PRIMARY KEY REFERENCES projects (id) ON DELETE CASCADE,
  organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  url text NOT NULL,
  secret text NOT NULL,
  quarantined_at timestamptz,
  last_error text,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
