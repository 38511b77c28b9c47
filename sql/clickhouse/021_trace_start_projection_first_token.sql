-- The start-time projection carries each roll-up row's first token too, so analytics over a time window
-- (trace counts, duration and time-to-first-token medians) reads only that window's rows from it
-- rather than every row of the table: it is added under a new name before the old one is dropped, so
-- reads bounded by start time always have one.
ALTER TABLE {{db}}.traces ADD PROJECTION IF NOT EXISTS by_start_time_with_first_token (
  SELECT organization_id, project_id, trace_id, start_time, end_time, first_token_at, first_ingested_at, last_ingested_at
  ORDER BY organization_id, project_id, start_time
);
ALTER TABLE {{db}}.traces MATERIALIZE PROJECTION by_start_time_with_first_token;
ALTER TABLE {{db}}.traces DROP PROJECTION IF EXISTS by_start_time;
