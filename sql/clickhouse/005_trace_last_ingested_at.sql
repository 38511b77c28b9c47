-- The latest ingest instant of the spans in each roll-up row. A read of the traces as they were at an
-- instant (the snapshot of a paged walk or an export, src/modules/traces/relation.ts) keeps the rows
-- ingested by then (last_ingested_at <= instant), drops those ingested after (first_ingested_at >
-- instant), and recomputes from spans only the traces whose rows a merge combined across the instant.
-- Rows written before this migration hold 0 here: they were all ingested before any such instant.
ALTER TABLE {{db}}.traces ADD COLUMN IF NOT EXISTS last_ingested_at SimpleAggregateFunction(max, DateTime64(3, 'UTC')) AFTER first_ingested_at;
ALTER TABLE {{db}}.traces ADD INDEX IF NOT EXISTS last_ingested_at_idx last_ingested_at TYPE minmax GRANULARITY 1;
ALTER TABLE {{db}}.traces MATERIALIZE INDEX last_ingested_at_idx;
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
  argMinStateIf(time_to_first_token_ns, span.start_time, operation IN ('chat', 'text_completion', 'generate_content') AND NOT is_usage_wrapper) AS time_to_first_token_ns,
  argMaxStateIf(span_id, span.end_time, operation IN ('chat', 'text_completion', 'generate_content') AND NOT is_usage_wrapper) AS last_llm_span_id,
  max(retention_days) AS retention_days
FROM {{db}}.spans AS span
GROUP BY organization_id, project_id, trace_id;
