-- One card per intent: an approve call claims its intent (tool, store,
-- canonical args) in the same transaction as its admission. While a card
-- for it is pending, an equivalent call ends already_pending instead of
-- putting up a second card. The card's end releases the claim; a claim
-- left behind lapses at its expiry.
CREATE TABLE pending_intents (
  intent      text PRIMARY KEY,
  workflow_id text NOT NULL,
  run_id      text NOT NULL,
  expires_at  timestamptz NOT NULL
);
COMMENT ON COLUMN pending_intents.intent IS 'Hex SHA-256 of the tool, the store and the canonical args (policy.Intent).';
CREATE INDEX pending_intents_by_call ON pending_intents (workflow_id, run_id);
GRANT SELECT, INSERT, UPDATE, DELETE ON pending_intents TO toolgate_worker;
