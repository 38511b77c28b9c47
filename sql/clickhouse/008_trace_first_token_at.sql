-- A trace's time to first token runs from the trace's start to the first token of its earliest completion that
-- measured one: min(span start + span TTFT) - trace start, read as first_token_at - start_time; 0 (first_token_at
-- NULL) only when no completion of the trace measured it. It was the TTFT of the trace's first completion, 0 when
-- that one had none even though a later one did. Traces ingested before this migration get it from
-- `bun run rebuild-rollups`.
ALTER TABLE {{db}}.traces ADD COLUMN IF NOT EXISTS first_token_at SimpleAggregateFunction(min, Nullable(DateTime64(9, 'UTC'))) AFTER defined_tools;
ALTER TABLE {{db}}.traces_mv MODIFY QUERY
SELECT
  organization_id,
  project_id,
  trace_id,
  min(start_time) AS start_time,
  max(end_time) AS end_time,
  min(ingested_at) AS first_ingested_at,
  max(ingested_at) AS last_ingested_at,
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
  minOrNullIf(fromUnixTimestamp64Nano(toInt64(toUnixTimestamp64Nano(span.start_time) + time_to_first_token_ns), 'UTC'), operation IN ('chat', 'text_completion', 'generate_content') AND NOT is_usage_wrapper AND time_to_first_token_ns > 0) AS first_token_at,
  argMaxStateIf(span_id, span.end_time, operation IN ('chat', 'text_completion', 'generate_content') AND NOT is_usage_wrapper) AS last_llm_span_id,
  max(retention_days) AS retention_days
FROM {{db}}.spans AS span
GROUP BY organization_id, project_id, trace_id;

ALTER TABLE {{db}}.traces DROP COLUMN IF EXISTS time_to_first_token_ns;
