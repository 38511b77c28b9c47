-- Session targets are evaluated over the sessions stream: monitors stored before it say so too.
UPDATE monitors SET target = jsonb_set(target, '{stream}', '"sessions"') WHERE target->>'type' = 'session' AND target->>'stream' IS DISTINCT FROM 'sessions';
