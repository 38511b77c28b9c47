-- Merges of `spans` go column by column (vertical) whatever their size. The default merges parts under
-- 131,072 rows with every column open at once: with 4-8 KB spans arriving in parts of ~10,000 rows,
-- nearly every merge, and each holds read and write buffers for ~70 columns of every part it merges.
-- Measured on chdb at full ingest load: peak RSS 1.6-1.7 GB → 1.25-1.3 GB, at the same throughput.
ALTER TABLE {{db}}.spans MODIFY SETTING vertical_merge_algorithm_min_rows_to_activate = 1;
