-- Span analytics per project and hour, fed at insert and merged at read: a range of analytics reads
-- one row per hour instead of every span in it (src/modules/traces/service.ts reads the spans of the
-- partial hours at the range's edges). Time to first token is a trace's, read from the roll-up. Retention is part of the
-- key so each row expires with its spans. A MergeTree target with a deduplication window, so an insert
-- of `spans` repeated with the same deduplication token is counted once here too.
CREATE TABLE IF NOT EXISTS {{db}}.analytics_hourly (
  organization_id String,
  project_id String,
  hour DateTime('UTC'),
  retention_days UInt16,
  spans SimpleAggregateFunction(sum, UInt64),
  -- Tokens of LLM completions; cost of every span but usage wrappers.
  tokens SimpleAggregateFunction(sum, UInt64),
  cost_total_microcents SimpleAggregateFunction(sum, UInt64)
)
ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMM(hour)
ORDER BY (organization_id, project_id, hour, retention_days)
TTL hour + toIntervalHour(1) + toIntervalDay(if(retention_days = 0, 90, retention_days))
SETTINGS non_replicated_deduplication_window = 10000;

CREATE MATERIALIZED VIEW IF NOT EXISTS {{db}}.analytics_hourly_mv TO {{db}}.analytics_hourly AS
SELECT
  organization_id,
  project_id,
  toStartOfHour(toDateTime(start_time, 'UTC')) AS hour,
  retention_days,
  count() AS spans,
  sumIf(tokens_input + tokens_output + tokens_cache_read + tokens_cache_create + tokens_reasoning,
    operation IN ('chat', 'text_completion', 'generate_content') AND NOT is_usage_wrapper) AS tokens,
  sumIf(cost_total_microcents, NOT is_usage_wrapper) AS cost_total_microcents
FROM {{db}}.spans
GROUP BY organization_id, project_id, hour, retention_days;

-- Spans stored before the view existed (spans inserted since have gone through it).
INSERT INTO {{db}}.analytics_hourly
SELECT
  organization_id,
  project_id,
  toStartOfHour(toDateTime(start_time, 'UTC')) AS hour,
  retention_days,
  count() AS spans,
  sumIf(tokens_input + tokens_output + tokens_cache_read + tokens_cache_create + tokens_reasoning,
    operation IN ('chat', 'text_completion', 'generate_content') AND NOT is_usage_wrapper) AS tokens,
  sumIf(cost_total_microcents, NOT is_usage_wrapper) AS cost_total_microcents
FROM {{db}}.spans
WHERE ingested_at < (SELECT metadata_modification_time FROM system.tables WHERE database = '{{db}}' AND name = 'analytics_hourly_mv')
GROUP BY organization_id, project_id, hour, retention_days;
