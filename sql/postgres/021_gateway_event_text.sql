-- A run's events are kept as the exact JSON text that was streamed, so an attached client reads the
-- same bytes as the run's own (jsonb would reorder keys) and nothing is serialized twice.
ALTER TABLE gateway_run_events ALTER COLUMN data TYPE text USING data::text;
