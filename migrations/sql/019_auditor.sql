-- The auditor (issue 17): the insights page, starter explain and starter
-- export-evals log in as toolgate_auditor, which may SELECT the audit log
-- and nothing else: no other table, no write, no function of toolgate's.
-- What the auditor's tools show can therefore never change what happened.
DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'toolgate_auditor') THEN
    CREATE ROLE toolgate_auditor LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION NOBYPASSRLS;
  END IF;
END
$$;

GRANT SELECT ON audit_log TO toolgate_auditor;
