-- An address receives mail carrying data (trace exports, later notifications) only once its owner
-- confirmed it through a mailed link. One row per lower-cased address; the link's secret is stored
-- as a SHA-256 hash only.
CREATE TABLE IF NOT EXISTS email_confirmations (
  email text PRIMARY KEY,
  token_hash text UNIQUE,
  sent_at timestamptz,
  confirmed_at timestamptz
);
