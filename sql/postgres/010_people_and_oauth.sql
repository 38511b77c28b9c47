-- Sign-in sessions of users: opaque cookie tokens, stored as SHA-256 digests.
CREATE TABLE IF NOT EXISTS sessions (
  token_hash text PRIMARY KEY,
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  -- The organization the console shows; any of the user's memberships.
  organization_id text REFERENCES organizations (id) ON DELETE SET NULL,
  expires_at timestamptz NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS sessions_user_idx ON sessions (user_id);
CREATE INDEX IF NOT EXISTS sessions_expiry_idx ON sessions (expires_at);

-- Single-use password reset links, mailed; digests only.
CREATE TABLE IF NOT EXISTS password_resets (
  token_hash text PRIMARY KEY,
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  expires_at timestamptz NOT NULL,
  used_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now()
);

-- Memberships get a stable id of their own: the SDK addresses members by it. The volatile default
-- fills existing rows with distinct ids and keeps inserts that do not name one working.
ALTER TABLE memberships ADD COLUMN IF NOT EXISTS id text NOT NULL DEFAULT ('m' || substr(md5(random()::text || clock_timestamp()::text), 1, 23));
CREATE UNIQUE INDEX IF NOT EXISTS memberships_id_key ON memberships (id);

-- Pending invitations to an organization; accepting one creates the membership.
CREATE TABLE IF NOT EXISTS invitations (
  id text PRIMARY KEY,
  organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  email text NOT NULL,
  role text NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
  token_hash text NOT NULL UNIQUE,
  inviter_id text REFERENCES users (id) ON DELETE SET NULL,
  expires_at timestamptz NOT NULL,
  accepted_at timestamptz,
  cancelled_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS invitations_org_idx ON invitations (organization_id, created_at);

-- OAuth clients: registered (RFC 7591) or known by their Client ID Metadata Document (id = its URL).
CREATE TABLE IF NOT EXISTS oauth_clients (
  id text PRIMARY KEY,
  name text,
  icon text,
  redirect_uris text[] NOT NULL,
  metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
  from_metadata_document boolean NOT NULL DEFAULT false,
  -- Set by the first consent; clients never authorized are pruned after a day.
  authorized_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS oauth_clients_unauthorized_idx ON oauth_clients (created_at) WHERE authorized_at IS NULL;

-- A grant is one consent: a user let a client act in one organization. The console's "OAuth keys".
CREATE TABLE IF NOT EXISTS oauth_grants (
  id text PRIMARY KEY,
  client_id text NOT NULL REFERENCES oauth_clients (id) ON DELETE CASCADE,
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  scope text NOT NULL,
  resource text,
  last_used_at timestamptz,
  revoked_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS oauth_grants_org_idx ON oauth_grants (organization_id, created_at);

CREATE TABLE IF NOT EXISTS oauth_codes (
  code_hash text PRIMARY KEY,
  grant_id text NOT NULL REFERENCES oauth_grants (id) ON DELETE CASCADE,
  redirect_uri text NOT NULL,
  code_challenge text NOT NULL,
  code_challenge_method text NOT NULL,
  scope text NOT NULL,
  expires_at timestamptz NOT NULL,
  used_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now()
);

-- Access and refresh tokens, digests only. A refresh token is revoked when rotated.
CREATE TABLE IF NOT EXISTS oauth_tokens (
  token_hash text PRIMARY KEY,
  kind text NOT NULL CHECK (kind IN ('access', 'refresh')),
  grant_id text NOT NULL REFERENCES oauth_grants (id) ON DELETE CASCADE,
  scope text NOT NULL,
  expires_at timestamptz NOT NULL,
  revoked_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS oauth_tokens_grant_idx ON oauth_tokens (grant_id);
