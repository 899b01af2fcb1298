-- The MCP server logs in as its own role. It issues each signed-in person
-- a credential bound to the sign-in its access token proves (issuer,
-- subject, role, stores, acr, auth_time), through one function: it cannot
-- read the vault, and a credential it issues carries the upstream secret
-- of that person's own seeded row, so it is a demo row (refused outside
-- dev mode) exactly when that one is.
DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'toolgate_mcp') THEN
    CREATE ROLE toolgate_mcp LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION NOBYPASSRLS;
  END IF;
END
$$;

CREATE FUNCTION vault.issue_for_sign_in(p_user text, p_issuer text, p_subject text, p_role text, p_stores bigint[], p_acr text, p_auth_time timestamptz)
RETURNS text LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, vault AS $$
DECLARE
  new_ref text := 'cr_' || replace(gen_random_uuid()::text, '-', '');
BEGIN
  INSERT INTO vault.credentials (ref, user_id, client_secret, issuer, subject, role, store_ids, acr, auth_time, demo)
  SELECT new_ref, c.user_id, c.client_secret, p_issuer, p_subject, p_role, p_stores, p_acr, p_auth_time, c.demo
  FROM vault.credentials c WHERE c.user_id = p_user AND c.ref = 'cred-' || p_user AND NOT c.revoked;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'no upstream credential for %', p_user USING ERRCODE = 'no_data_found';
  END IF;
  RETURN new_ref;
END
$$;
REVOKE ALL ON FUNCTION vault.issue_for_sign_in(text, text, text, text, bigint[], text, timestamptz) FROM PUBLIC;
GRANT USAGE ON SCHEMA vault TO toolgate_mcp;
GRANT EXECUTE ON FUNCTION vault.issue_for_sign_in(text, text, text, text, bigint[], text, timestamptz) TO toolgate_mcp;
