-- A SECURITY DEFINER function runs as the owner for a service. Unless its
-- search_path names pg_temp, PostgreSQL searches the session's temporary
-- schema first, so a service that made a temporary table named as one the
-- function writes (audit_keys, limit_usage, vault.credentials) would have
-- the owner write that table instead: a replayed audit row written twice,
-- an admitted call left uncounted. Each such function now searches pg_temp
-- last, and no service may make a temporary table in this database at all.
DO $$
DECLARE
  f    record;
  path text;
BEGIN
  EXECUTE format('REVOKE TEMPORARY ON DATABASE %I FROM PUBLIC', current_database());
  FOR f IN
    SELECT p.oid::regprocedure AS fn,
           (SELECT substr(c, length('search_path=') + 1) FROM unnest(p.proconfig) c WHERE c LIKE 'search_path=%') AS path
    FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
    WHERE p.prosecdef AND n.nspname NOT IN ('pg_catalog', 'information_schema')
  LOOP
    path := coalesce(f.path, 'pg_catalog, public');
    IF path NOT LIKE '%, pg_temp' THEN
      EXECUTE format('ALTER FUNCTION %s SET search_path = %s, pg_temp', f.fn, path);
    END IF;
  END LOOP;
END
$$;
