-- The flaggers whose annotations a signal holds: the signal's score evidence (which Agent Score
-- dimension each informs) is read off them. Discovery adds a flagger when it links one of its
-- annotations; existing signals get theirs from their members.
ALTER TABLE signals ADD COLUMN IF NOT EXISTS flaggers text[] NOT NULL DEFAULT '{}';
UPDATE signals SET flaggers = found.flaggers
FROM (
  SELECT m.signal_id, array_agg(DISTINCT s.metadata->>'flagger' ORDER BY s.metadata->>'flagger') AS flaggers
  FROM signal_members m JOIN scores s ON s.id = m.score_id
  WHERE s.source = 'annotation' AND s.source_id = 'SYSTEM' AND s.metadata ? 'flagger'
  GROUP BY m.signal_id
) AS found
WHERE signals.id = found.signal_id;
