-- A failed score's discovery event follows the score's eligibility (published, passed = false, not
-- errored, non-blank feedback, not deleted); see ScoreStore. A score has at most one live event
-- (retracted_at IS NULL): pending until discovery consumes it, deleted if the score stops being
-- eligible first, marked retracted_at if it stops being eligible after. A score that becomes
-- eligible again after a retraction gets a new pending event.
ALTER TABLE failed_score_events DROP CONSTRAINT IF EXISTS failed_score_events_score_id_key;
ALTER TABLE failed_score_events ADD COLUMN IF NOT EXISTS retracted_at timestamptz;
CREATE UNIQUE INDEX IF NOT EXISTS failed_score_events_live_idx ON failed_score_events (score_id) WHERE retracted_at IS NULL;
