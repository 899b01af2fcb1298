-- One row per call ID: the first run of a workflow ID claims it, with the
-- fingerprint of what was asked (tool, canonical args, session). A later run
-- of the same ID (a bare client's default reuse policy, or a terminate-and-
-- restart) finds the claim: it never admits, audits or executes again, and
-- a different fingerprint is an idempotency_conflict.
CREATE TABLE tool_calls (
  workflow_id text PRIMARY KEY,
  run_id      text NOT NULL,
  fingerprint text NOT NULL,
  tool        text NOT NULL,
  user_id     text NOT NULL,
  claimed_at  timestamptz NOT NULL DEFAULT now()
);
GRANT SELECT, INSERT ON tool_calls TO toolgate_app;
