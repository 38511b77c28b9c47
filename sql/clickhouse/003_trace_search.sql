-- Embeddings of spans' message text for semantic trace search, written shortly after ingest by the
-- embedding indexer (src/modules/traces/embeddings.ts) when EMBEDDINGS_BASE_URL is set. A trace's
-- relevance to a query is the best similarity among its spans, so spans arriving late are embedded
-- on their own and nothing is embedded twice.
CREATE TABLE IF NOT EXISTS {{db}}.span_embeddings (
  organization_id String,
  project_id String,
  trace_id String,
  span_id String,
  model LowCardinality(String),
  embedding Array(Float32) CODEC(ZSTD(1)),
  span_start_time DateTime64(9, 'UTC'),
  -- `ingested_at` of the span: the indexer's progress mark.
  source_ingested_at DateTime64(3, 'UTC'),
  embedded_at DateTime64(3, 'UTC') DEFAULT now64(3),
  retention_days UInt16
)
ENGINE = ReplacingMergeTree(embedded_at)
PARTITION BY toYYYYMM(span_start_time)
ORDER BY (organization_id, project_id, trace_id, span_id, model)
TTL toDateTime(span_start_time) + toIntervalDay(if(retention_days = 0, 90, retention_days));

-- Recent inserts sit in recent parts: reads of "spans ingested after t" (the embedding indexer, the
-- snapshot of a paged trace list) skip older granules.
ALTER TABLE {{db}}.spans ADD INDEX IF NOT EXISTS ingested_at_idx ingested_at TYPE minmax GRANULARITY 1;
