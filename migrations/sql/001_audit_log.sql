-- The append-only audit log. The services act as toolgate_app, which may
-- INSERT and SELECT only; the triggers refuse UPDATE, DELETE and TRUNCATE
-- for everyone, the owner included.
DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'toolgate_app') THEN
    CREATE ROLE toolgate_app LOGIN;
  END IF;
END
$$;

CREATE TABLE audit_log (
  id              bigserial PRIMARY KEY,
  at              timestamptz NOT NULL DEFAULT clock_timestamp(),
  event           text NOT NULL CHECK (event IN ('allowed', 'needs_approval', 'denied', 'approval_refused',
                                                 'approved', 'rejected', 'expired', 'executed', 'failed')),
  reason          text NOT NULL,
  tool            text NOT NULL,
  user_id         text NOT NULL,
  role            text NOT NULL,
  session_id      text NOT NULL,
  conversation_id text NOT NULL,
  args            jsonb,
  store_id        bigint,
  value_cents     bigint,
  workflow_id     text NOT NULL,
  run_id          text NOT NULL,
  event_key       text NOT NULL,
  approver_id     text,
  approver_role   text,
  message         text,
  result          jsonb,
  UNIQUE (workflow_id, run_id, event_key)
);

COMMENT ON COLUMN audit_log.workflow_id IS 'The ToolCall workflow ID, also the Idempotency-Key sent upstream.';
COMMENT ON COLUMN audit_log.event_key IS 'Names the event within its run, so a retried or replayed insert never writes a second row.';

CREATE INDEX audit_log_by_store ON audit_log (tool, store_id, at);
CREATE INDEX audit_log_by_user ON audit_log (tool, user_id, at);
CREATE INDEX audit_log_by_workflow ON audit_log (workflow_id);

CREATE FUNCTION audit_log_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'audit_log is append-only: % is refused', TG_OP
    USING ERRCODE = 'insufficient_privilege';
END
$$;

CREATE TRIGGER audit_log_no_update_delete BEFORE UPDATE OR DELETE ON audit_log
  FOR EACH STATEMENT EXECUTE FUNCTION audit_log_refuse();
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
  FOR EACH STATEMENT EXECUTE FUNCTION audit_log_refuse();

REVOKE ALL ON audit_log FROM PUBLIC;
GRANT SELECT, INSERT ON audit_log TO toolgate_app;
GRANT USAGE ON SEQUENCE audit_log_id_seq TO toolgate_app;

-- The demo vault: credential references and the secrets they stand for.
-- Only the worker's activities read it, to exchange a credential for a
-- short-lived upstream token.
CREATE SCHEMA vault;
CREATE TABLE vault.credentials (
  ref           text PRIMARY KEY,
  user_id       text NOT NULL,
  client_secret text NOT NULL,
  revoked       boolean NOT NULL DEFAULT false
);
GRANT USAGE ON SCHEMA vault TO toolgate_app;
GRANT SELECT ON vault.credentials TO toolgate_app;

INSERT INTO vault.credentials (ref, user_id, client_secret) VALUES
  ('cred-ama', 'ama', 'demo-secret-ama'),
  ('cred-efua', 'efua', 'demo-secret-efua'),
  ('cred-kofi', 'kofi', 'demo-secret-kofi'),
  ('cred-yaw', 'yaw', 'demo-secret-yaw');
