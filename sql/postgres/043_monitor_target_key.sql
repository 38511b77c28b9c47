-- The target a monitor was created for by `for-target` (type and canonical filters): one live monitor per key,
-- so concurrent find-or-create calls for the same target leave one monitor.
ALTER TABLE monitors ADD COLUMN IF NOT EXISTS target_key text;
CREATE UNIQUE INDEX IF NOT EXISTS monitors_target_key ON monitors (project_id, target_key) WHERE target_key IS NOT NULL AND deleted_at IS NULL;
