-- Each service logs in as its own role: never the owner, never a superuser,
-- so nothing a service's connection can say (RESET ROLE, SET
-- session_replication_role, ALTER TABLE ... DISABLE TRIGGER, DROP, GRANT)
-- can rewrite the audit log. Migrations run as the owner. Roles are
-- cluster-wide; passwords (or certificates) are the deployment's to set.
DO $$
DECLARE r text;
BEGIN
  FOREACH r IN ARRAY ARRAY['toolgate_worker', 'toolgate_approvals', 'toolgate_upstream'] LOOP
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = r) THEN
      EXECUTE format('CREATE ROLE %I LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION NOBYPASSRLS', r);
    END IF;
  END LOOP;
END
$$;

-- The worker: appends to the audit log and reads it (limits), reads the
-- vault, keeps the card projection and the call claims.
GRANT SELECT, INSERT ON audit_log TO toolgate_worker;
GRANT USAGE ON SEQUENCE audit_log_id_seq TO toolgate_worker;
GRANT USAGE ON SCHEMA vault TO toolgate_worker;
GRANT SELECT ON vault.credentials TO toolgate_worker;
GRANT SELECT, INSERT, UPDATE ON pending_action TO toolgate_worker;
GRANT SELECT, INSERT ON tool_calls TO toolgate_worker;

-- The card UI: reads cards and the refusals it shows.
GRANT SELECT ON pending_action TO toolgate_approvals;
GRANT SELECT ON audit_log TO toolgate_approvals;

-- The Mangrove demo upstream: its own schema, nothing of toolgate's.
GRANT USAGE ON SCHEMA mangrove TO toolgate_upstream;
GRANT SELECT ON ALL TABLES IN SCHEMA mangrove TO toolgate_upstream;
GRANT INSERT ON mangrove.tasks, mangrove.transfers TO toolgate_upstream;
GRANT INSERT, UPDATE ON mangrove.stock TO toolgate_upstream;
GRANT USAGE ON ALL SEQUENCES IN SCHEMA mangrove TO toolgate_upstream;
