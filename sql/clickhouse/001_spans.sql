-- One row per span. Tenant first, then time, then trace: list and analytics scans stay inside one
-- project's time range. ReplacingMergeTree folds a span written twice (an export retried by a client).
CREATE TABLE IF NOT EXISTS {{db}}.spans (
  organization_id String,
  project_id String,
  trace_id String,
  span_id String,
  parent_span_id String,
  name String,
  kind LowCardinality(String),
  status_code LowCardinality(String),
  status_message String,
  trace_state String,
  trace_flags UInt32,
  scope_name LowCardinality(String),
  scope_version LowCardinality(String),
  service_name LowCardinality(String),
  start_time DateTime64(9, 'UTC'),
  end_time DateTime64(9, 'UTC'),
  duration_ns UInt64,
  ingested_at DateTime64(3, 'UTC') DEFAULT now64(3),
  api_key_id String,
  operation LowCardinality(String),
  provider LowCardinality(String),
  model LowCardinality(String),
  response_model LowCardinality(String),
  response_id String,
  finish_reasons Array(LowCardinality(String)),
  error_type String,
  session_id String,
  user_id String,
  simulation_id String,
  tags Array(String),
  metadata Map(String, String),
  tokens_input UInt64,
  tokens_output UInt64,
  tokens_cache_read UInt64,
  tokens_cache_create UInt64,
  tokens_reasoning UInt64,
  cost_input_microcents UInt64,
  cost_output_microcents UInt64,
  cost_total_microcents UInt64,
  cost_is_estimated Bool,
  time_to_first_token_ns UInt64,
  is_streaming Bool,
  -- Only repeated usage of a wrapper span (Vercel ai.generateText over doGenerate): excluded from roll-ups.
  is_usage_wrapper Bool DEFAULT false,
  tool_call_id String,
  tool_name LowCardinality(String),
  tool_input String CODEC(ZSTD(3)),
  tool_output String CODEC(ZSTD(3)),
  defined_tools Array(String),
  tool_definitions String CODEC(ZSTD(3)),
  system_instructions String CODEC(ZSTD(3)),
  input_messages String CODEC(ZSTD(3)),
  output_messages String CODEC(ZSTD(3)),
  -- Plain text of the input and output messages, for full-text search.
  message_text String CODEC(ZSTD(3)),
  memory_store_id String,
  memory_record_id String,
  attr_string Map(String, String),
  attr_int Map(String, Int64),
  attr_float Map(String, Float64),
  attr_bool Map(String, Bool),
  resource_string Map(String, String),
  events_json String CODEC(ZSTD(3)),
  links_json String CODEC(ZSTD(3)),
  -- 0 means the deployment default applies.
  retention_days UInt16,
  INDEX trace_id_idx trace_id TYPE bloom_filter(0.001) GRANULARITY 1,
  INDEX session_id_idx session_id TYPE bloom_filter(0.01) GRANULARITY 4,
  INDEX user_id_idx user_id TYPE bloom_filter(0.01) GRANULARITY 4,
  INDEX model_idx model TYPE bloom_filter(0.01) GRANULARITY 4,
  INDEX tags_idx tags TYPE bloom_filter(0.01) GRANULARITY 4,
  INDEX message_text_idx message_text TYPE text(tokenizer = splitByNonAlpha) GRANULARITY 64
)
ENGINE = ReplacingMergeTree(ingested_at)
PARTITION BY toYYYYMM(start_time)
ORDER BY (organization_id, project_id, start_time, trace_id, span_id)
TTL toDateTime(start_time) + toIntervalDay(if(retention_days = 0, 90, retention_days))
SETTINGS index_granularity = 8192, non_replicated_deduplication_window = 10000;

-- Trace roll-up: partial aggregate states written per insert, merged at read time with GROUP BY trace_id,
-- so spans of one trace arriving in many requests minutes apart still add up.
CREATE TABLE IF NOT EXISTS {{db}}.traces (
  organization_id String,
  project_id String,
  trace_id String,
  start_time SimpleAggregateFunction(min, DateTime64(9, 'UTC')),
  end_time SimpleAggregateFunction(max, DateTime64(9, 'UTC')),
  first_ingested_at SimpleAggregateFunction(min, DateTime64(3, 'UTC')),
  span_count SimpleAggregateFunction(sum, UInt64),
  error_count SimpleAggregateFunction(sum, UInt64),
  tokens_input SimpleAggregateFunction(sum, UInt64),
  tokens_output SimpleAggregateFunction(sum, UInt64),
  tokens_cache_read SimpleAggregateFunction(sum, UInt64),
  tokens_cache_create SimpleAggregateFunction(sum, UInt64),
  tokens_reasoning SimpleAggregateFunction(sum, UInt64),
  cost_input_microcents SimpleAggregateFunction(sum, UInt64),
  cost_output_microcents SimpleAggregateFunction(sum, UInt64),
  cost_total_microcents SimpleAggregateFunction(sum, UInt64),
  session_id SimpleAggregateFunction(any, Nullable(String)),
  user_id SimpleAggregateFunction(any, Nullable(String)),
  simulation_id SimpleAggregateFunction(any, Nullable(String)),
  root_span_id SimpleAggregateFunction(any, Nullable(String)),
  root_span_name SimpleAggregateFunction(any, Nullable(String)),
  tags SimpleAggregateFunction(groupUniqArrayArray, Array(String)),
  models SimpleAggregateFunction(groupUniqArrayArray, Array(String)),
  providers SimpleAggregateFunction(groupUniqArrayArray, Array(String)),
  service_names SimpleAggregateFunction(groupUniqArrayArray, Array(String)),
  tools SimpleAggregateFunction(groupUniqArrayArray, Array(String)),
  defined_tools SimpleAggregateFunction(groupUniqArrayArray, Array(String)),
  -- time to first token of the trace's first LLM span, and the trace's last LLM-completion span
  time_to_first_token_ns AggregateFunction(argMin, UInt64, DateTime64(9, 'UTC')),
  last_llm_span_id AggregateFunction(argMax, String, DateTime64(9, 'UTC')),
  retention_days SimpleAggregateFunction(max, UInt16)
)
ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMM(start_time)
ORDER BY (organization_id, project_id, trace_id)
TTL toDateTime(start_time) + toIntervalDay(if(retention_days = 0, 90, retention_days))
SETTINGS non_replicated_deduplication_window = 10000;

CREATE MATERIALIZED VIEW IF NOT EXISTS {{db}}.traces_mv TO {{db}}.traces AS
SELECT
  organization_id,
  project_id,
  trace_id,
  min(start_time) AS start_time,
  max(end_time) AS end_time,
  min(ingested_at) AS first_ingested_at,
  count() AS span_count,
  countIf(status_code = 'error') AS error_count,
  sumIf(tokens_input, NOT is_usage_wrapper) AS tokens_input,
  sumIf(tokens_output, NOT is_usage_wrapper) AS tokens_output,
  sumIf(tokens_cache_read, NOT is_usage_wrapper) AS tokens_cache_read,
  sumIf(tokens_cache_create, NOT is_usage_wrapper) AS tokens_cache_create,
  sumIf(tokens_reasoning, NOT is_usage_wrapper) AS tokens_reasoning,
  sumIf(cost_input_microcents, NOT is_usage_wrapper) AS cost_input_microcents,
  sumIf(cost_output_microcents, NOT is_usage_wrapper) AS cost_output_microcents,
  sumIf(cost_total_microcents, NOT is_usage_wrapper) AS cost_total_microcents,
  any(nullIf(session_id, '')) AS session_id,
  any(nullIf(user_id, '')) AS user_id,
  any(nullIf(simulation_id, '')) AS simulation_id,
  any(if(parent_span_id = '', span_id, NULL)) AS root_span_id,
  any(if(parent_span_id = '', name, NULL)) AS root_span_name,
  groupUniqArrayArray(tags) AS tags,
  groupUniqArrayIf(toString(model), model != '') AS models,
  groupUniqArrayIf(toString(provider), provider != '') AS providers,
  groupUniqArrayIf(toString(service_name), service_name != '') AS service_names,
  groupUniqArrayIf(toString(tool_name), operation = 'execute_tool' AND tool_name != '') AS tools,
  groupUniqArrayArray(defined_tools) AS defined_tools,
  argMinStateIf(time_to_first_token_ns, span.start_time, operation IN ('chat', 'text_completion', 'generate_content') AND NOT is_usage_wrapper) AS time_to_first_token_ns,
  argMaxStateIf(span_id, span.end_time, operation IN ('chat', 'text_completion', 'generate_content') AND NOT is_usage_wrapper) AS last_llm_span_id,
  max(retention_days) AS retention_days
FROM {{db}}.spans AS span
GROUP BY organization_id, project_id, trace_id;

-- Session roll-up, merged at read time like traces.
CREATE TABLE IF NOT EXISTS {{db}}.sessions (
  organization_id String,
  project_id String,
  session_id String,
  start_time SimpleAggregateFunction(min, DateTime64(9, 'UTC')),
  end_time SimpleAggregateFunction(max, DateTime64(9, 'UTC')),
  trace_ids SimpleAggregateFunction(groupUniqArrayArray, Array(String)),
  span_count SimpleAggregateFunction(sum, UInt64),
  error_count SimpleAggregateFunction(sum, UInt64),
  tokens_total SimpleAggregateFunction(sum, UInt64),
  cost_total_microcents SimpleAggregateFunction(sum, UInt64),
  user_id SimpleAggregateFunction(any, Nullable(String)),
  retention_days SimpleAggregateFunction(max, UInt16)
)
ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMM(start_time)
ORDER BY (organization_id, project_id, session_id)
TTL toDateTime(start_time) + toIntervalDay(if(retention_days = 0, 90, retention_days))
SETTINGS non_replicated_deduplication_window = 10000;

CREATE MATERIALIZED VIEW IF NOT EXISTS {{db}}.sessions_mv TO {{db}}.sessions AS
SELECT
  organization_id,
  project_id,
  session_id,
  min(start_time) AS start_time,
  max(end_time) AS end_time,
  groupUniqArray(trace_id) AS trace_ids,
  count() AS span_count,
  countIf(status_code = 'error') AS error_count,
  sumIf(tokens_input + tokens_output + tokens_cache_read + tokens_cache_create + tokens_reasoning, NOT is_usage_wrapper) AS tokens_total,
  sumIf(cost_total_microcents, NOT is_usage_wrapper) AS cost_total_microcents,
  any(nullIf(user_id, '')) AS user_id,
  max(retention_days) AS retention_days
FROM {{db}}.spans
WHERE session_id != ''
GROUP BY organization_id, project_id, session_id;
