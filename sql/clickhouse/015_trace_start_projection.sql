-- The trace roll-up in start order as well: a projection sorted by tenant and start time, which
-- ClickHouse reads instead of the table when a query bounds start_time (the newest page of the trace
-- list, a time window of analytics), so those reads touch only the granules of that window rather than
-- every trace of the project. Merges of this aggregating table combine rows, so they rebuild the
-- projection from the merged rows. The projection lives in the same parts as the rows: an insert
-- deduplicated by its token is deduplicated with its projection.
-- `rebuild-rollups` deletes roll-up rows: the projection is rebuilt with them.
ALTER TABLE {{db}}.traces MODIFY SETTING deduplicate_merge_projection_mode = 'rebuild', lightweight_mutation_projection_mode = 'rebuild';
ALTER TABLE {{db}}.traces ADD PROJECTION IF NOT EXISTS by_start_time (
  SELECT organization_id, project_id, trace_id, start_time, end_time, first_ingested_at, last_ingested_at
  ORDER BY organization_id, project_id, start_time
);
ALTER TABLE {{db}}.traces MATERIALIZE PROJECTION by_start_time;
