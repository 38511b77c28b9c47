-- Per project and flagger: the percentage of no-match traces sent to the LLM judge (SIGNALS.md:
-- default 10, kept as the default when a flagger has no entry here).
ALTER TABLE projects ADD COLUMN IF NOT EXISTS flagger_sampling jsonb NOT NULL DEFAULT '{}'::jsonb;
