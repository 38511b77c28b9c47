-- Retention deadlines past 2106-02-07 (the end of DateTime) wrapped around to 1970 and deleted rows at
-- once: a span with `latitude.retention_days` of decades, or a start time far ahead. The deadline is now
-- computed in seconds and held at the end of DateTime, which then means "never". Existing parts keep the
-- deadlines they were written with (no rewrite on upgrade); rows they held past 2106 are gone already.
ALTER TABLE {{db}}.spans MODIFY TTL toDateTime(least(greatest(intDiv(toUnixTimestamp64Milli(start_time), 1000), 0) + 86400 * if(retention_days = 0, 90, retention_days), 4294967295)) SETTINGS materialize_ttl_after_modify = 0;
ALTER TABLE {{db}}.traces MODIFY TTL toDateTime(least(greatest(intDiv(toUnixTimestamp64Milli(start_time), 1000), 0) + 86400 * if(retention_days = 0, 90, retention_days), 4294967295)) SETTINGS materialize_ttl_after_modify = 0;
ALTER TABLE {{db}}.sessions MODIFY TTL toDateTime(least(greatest(intDiv(toUnixTimestamp64Milli(start_time), 1000), 0) + 86400 * if(retention_days = 0, 90, retention_days), 4294967295)) SETTINGS materialize_ttl_after_modify = 0;
ALTER TABLE {{db}}.span_embeddings MODIFY TTL toDateTime(least(greatest(intDiv(toUnixTimestamp64Milli(span_start_time), 1000), 0) + 86400 * if(retention_days = 0, 90, retention_days), 4294967295)) SETTINGS materialize_ttl_after_modify = 0;
