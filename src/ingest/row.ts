/**
 * One span as stored in ClickHouse `spans` (sql/clickhouse/001_spans.sql): the contract between
 * map → redact → price and the writer. Field names are the column names.
 */
export interface SpanRow {
  organization_id: string;
  project_id: string;
  trace_id: string;
  span_id: string;
  /** "" for root spans. */
  parent_span_id: string;
  name: string;
  kind: "unspecified" | "internal" | "server" | "client" | "producer" | "consumer";
  status_code: "unset" | "ok" | "error";
  status_message: string;
  trace_state: string;
  trace_flags: number;
  scope_name: string;
  scope_version: string;
  service_name: string;
  /** Unix epoch nanoseconds as a decimal string: 64-bit values stay exact. */
  start_time: string;
  end_time: string;
  duration_ns: number;
  api_key_id: string;
  operation: string;
  provider: string;
  model: string;
  response_model: string;
  response_id: string;
  finish_reasons: string[];
  error_type: string;
  session_id: string;
  user_id: string;
  simulation_id: string;
  tags: string[];
  metadata: Record<string, string>;
  tokens_input: number;
  tokens_output: number;
  tokens_cache_read: number;
  tokens_cache_create: number;
  tokens_reasoning: number;
  cost_input_microcents: number;
  cost_output_microcents: number;
  cost_total_microcents: number;
  cost_is_estimated: boolean;
  time_to_first_token_ns: number;
  is_streaming: boolean;
  is_usage_wrapper: boolean;
  tool_call_id: string;
  tool_name: string;
  tool_input: string;
  tool_output: string;
  defined_tools: string[];
  /** JSON array of {name, description, parameters}. "" when none. */
  tool_definitions: string;
  /** JSON array of GenAI parts. "" when none. */
  system_instructions: string;
  /** JSON arrays of GenAI messages {role, parts:[...]}. "" when none. */
  input_messages: string;
  output_messages: string;
  message_text: string;
  memory_store_id: string;
  memory_record_id: string;
  attr_string: Record<string, string>;
  attr_int: Record<string, number>;
  attr_float: Record<string, number>;
  attr_bool: Record<string, boolean>;
  resource_string: Record<string, string>;
  /** JSON arrays of events / links. "" when none. */
  events_json: string;
  links_json: string;
  retention_days: number;
}
