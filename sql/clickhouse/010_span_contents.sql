-- Messages of a span sent apart from it, as OTLP log records (the GenAI events of the official OpenTelemetry
-- instrumentations: `gen_ai.client.inference.operation.details`, `gen_ai.user.message`, `gen_ai.choice`, …). One row
-- per log record, keyed by the span it names, so a record may arrive before or after its span, in any export and
-- any process: reads of a span's messages merge these rows in (src/modules/traces/contents.ts), in record order.
-- A retried export is folded by the record's hash.
CREATE TABLE IF NOT EXISTS {{db}}.span_contents (
  organization_id String,
  project_id String,
  trace_id String,
  span_id String,
  record_time DateTime64(9, 'UTC'),
  -- The record's place in its export, for records of the same instant.
  record_index UInt32,
  record_hash String,
  event_name LowCardinality(String),
  system_instructions String CODEC(ZSTD(3)),
  input_messages String CODEC(ZSTD(3)),
  output_messages String CODEC(ZSTD(3)),
  message_text String CODEC(ZSTD(3)),
  finish_reasons Array(LowCardinality(String)),
  ingested_at DateTime64(3, 'UTC') DEFAULT now64(3),
  retention_days UInt16,
  INDEX message_words_idx lower(message_text) TYPE text(tokenizer = splitByNonAlpha)
)
ENGINE = ReplacingMergeTree(ingested_at)
PARTITION BY toYYYYMM(record_time)
ORDER BY (organization_id, project_id, trace_id, span_id, record_hash)
TTL toDateTime(record_time) + toIntervalDay(if(retention_days = 0, 90, retention_days));
