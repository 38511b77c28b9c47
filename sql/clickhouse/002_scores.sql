-- Copy of PostgreSQL `scores` for trace filters (score.*) and analytics, written by the score copy
-- worker. Absent values are '' as in spans. ReplacingMergeTree keeps the highest version of a score
-- and drops it under FINAL once its latest version is a deletion.
CREATE TABLE IF NOT EXISTS {{db}}.scores (
  organization_id String,
  project_id String,
  trace_id String,
  id String,
  span_id String,
  session_id String,
  simulation_id String,
  signal_id String,
  source LowCardinality(String),
  source_id String,
  annotator_id String,
  value Float64,
  passed Bool,
  errored Bool,
  duration UInt64,
  tokens UInt64,
  cost UInt64,
  drafted_at Nullable(DateTime64(3, 'UTC')),
  created_at DateTime64(3, 'UTC'),
  updated_at DateTime64(3, 'UTC'),
  version UInt64,
  deleted UInt8,
  INDEX signal_id_idx signal_id TYPE bloom_filter(0.01) GRANULARITY 4
)
ENGINE = ReplacingMergeTree(version, deleted)
PARTITION BY toYYYYMM(created_at)
ORDER BY (organization_id, project_id, trace_id, id);
