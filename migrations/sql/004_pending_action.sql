-- The card projection for approval UIs. The workflow is the source of
-- truth; each write carries a version so a late or retried write never
-- moves a card back (pending 1, decided 2, final 3).
CREATE TABLE pending_action (
  workflow_id     text PRIMARY KEY,
  run_id          text NOT NULL,
  version         integer NOT NULL,
  tool            text NOT NULL,
  requested_by    text NOT NULL,
  requester_role  text NOT NULL,
  store_id        bigint NOT NULL,
  args            jsonb NOT NULL,
  args_hash       text NOT NULL,
  card            text NOT NULL,
  value_cents     bigint NOT NULL,
  approver_role   text NOT NULL,
  reason          text NOT NULL DEFAULT '',
  status          text NOT NULL CHECK (status IN ('pending_approval', 'approved', 'rejected', 'expired', 'executed', 'failed')),
  expires_at      timestamptz NOT NULL,
  decided_by      text,
  decided_role    text,
  decided_at      timestamptz,
  decision_note   text,
  result          jsonb,
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX pending_action_inbox ON pending_action (status, approver_role, store_id, expires_at);
GRANT SELECT, INSERT, UPDATE ON pending_action TO toolgate_app;
