-- Set while the seasonal detector holds a signal escalating (src/modules/monitors/evaluate.ts): the
-- signal then reads as `escalating` (src/modules/signals/states.ts).
ALTER TABLE signals ADD COLUMN IF NOT EXISTS escalating_since timestamptz;
