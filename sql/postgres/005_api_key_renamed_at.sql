-- When a key was last renamed: part of its updatedAt, with creation, last use and revocation.
ALTER TABLE api_keys ADD COLUMN IF NOT EXISTS renamed_at timestamptz;
