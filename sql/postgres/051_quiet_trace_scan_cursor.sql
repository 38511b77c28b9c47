-- The quiet-trace scan pages by (last_ingested_at, organization, project, trace): one insert stamps every
-- trace it holds with the same instant, often more traces than one scan batch takes. Empty when the scan
-- has taken every trace up to `scanned_until`.
ALTER TABLE quiet_trace_scan ADD COLUMN IF NOT EXISTS scanned_through_trace text[] NOT NULL DEFAULT '{}';
