-- Centroids and member embeddings as little-endian float32 bytes: reading 500 real[] centroids took
-- over a second of array parsing per discovery batch; the bytes take milliseconds.
ALTER TABLE signals DROP COLUMN IF EXISTS centroid;
ALTER TABLE signals ADD COLUMN centroid bytea;
ALTER TABLE signal_members DROP COLUMN IF EXISTS embedding;
ALTER TABLE signal_members ADD COLUMN embedding bytea NOT NULL DEFAULT ''::bytea;
ALTER TABLE signal_members ALTER COLUMN embedding DROP DEFAULT;
