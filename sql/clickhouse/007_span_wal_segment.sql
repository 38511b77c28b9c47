-- The write-ahead log segment whose insert stored the row. An insert skips the spans other segments already
-- stored (an export retried by a client), never its own: replayed after a crash that came between the commit
-- of its `spans` part and its views' parts, the segment sends the very same rows under the same deduplication
-- token, so ClickHouse skips them in `spans` and still writes the roll-up parts that were lost.
-- Empty for rows written before this migration.
ALTER TABLE {{db}}.spans ADD COLUMN IF NOT EXISTS wal_segment String DEFAULT '' CODEC(ZSTD(1));
