-- Lockout ends authority everywhere: when the provider ends a person's
-- sessions (a lock, a role change, by back-channel logout), every
-- credential issued to that person's sign-ins is revoked, no credential is
-- issued for a sign-in from before, and the MCP server refuses any token
-- whose sign-in is no later than the revocation.
CREATE TABLE vault.sign_in_revocations (
  issuer     text NOT NULL,
  subject    text NOT NULL,
  revoked_at timestamptz NOT NULL,
  reason     text NOT NULL,
  PRIMARY KEY (issuer, subject)
);
REVOKE ALL ON vault.sign_in_revocations FROM PUBLIC;

-- revoke_sign_in ends the authority of every sign-in of (issuer, subject)
-- up to now, and returns how many credentials it revoked.
CREATE FUNCTION vault.revoke_sign_in(p_issuer text, p_subject text, p_reason text)
RETURNS integer LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, vault AS $$
DECLARE
  n integer;
BEGIN
  IF coalesce(p_issuer, '') = '' OR coalesce(p_subject, '') = '' THEN
    RAISE EXCEPTION 'a revocation names an issuer and a subject' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  -- One person's revocations and issues take turns, so a credential issued
  -- while the revocation runs is either refused or revoked with the rest.
  PERFORM pg_advisory_xact_lock(hashtextextended('toolgate-sign-in:' || p_issuer || '|' || p_subject, 0));
  INSERT INTO vault.sign_in_revocations (issuer, subject, revoked_at, reason)
  VALUES (p_issuer, p_subject, clock_timestamp(), left(coalesce(p_reason, ''), 200))
  ON CONFLICT (issuer, subject) DO UPDATE SET revoked_at = greatest(vault.sign_in_revocations.revoked_at, EXCLUDED.revoked_at), reason = EXCLUDED.reason;
  UPDATE vault.credentials SET revoked = true WHERE issuer = p_issuer AND subject = p_subject AND NOT revoked;
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END
$$;

-- sign_in_revoked reports whether a sign-in at p_auth_time (NULL: unknown)
-- was ended by a revocation since.
CREATE FUNCTION vault.sign_in_revoked(p_issuer text, p_subject text, p_auth_time timestamptz)
RETURNS boolean LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, vault AS $$
  SELECT EXISTS (SELECT 1 FROM vault.sign_in_revocations r WHERE r.issuer = p_issuer AND r.subject = p_subject
                 AND (p_auth_time IS NULL OR p_auth_time <= r.revoked_at));
$$;

-- A credential is never issued for a sign-in a revocation ended.
CREATE OR REPLACE FUNCTION vault.issue_for_sign_in(p_user text, p_issuer text, p_subject text, p_role text, p_stores bigint[], p_acr text, p_auth_time timestamptz)
RETURNS text LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, vault AS $$
DECLARE
  new_ref text := 'cr_' || replace(gen_random_uuid()::text, '-', '');
BEGIN
  IF coalesce(p_issuer, '') = '' OR coalesce(p_subject, '') = '' THEN
    RAISE EXCEPTION 'a credential is issued to a sign-in that names an issuer and a subject' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  PERFORM pg_advisory_xact_lock(hashtextextended('toolgate-sign-in:' || p_issuer || '|' || p_subject, 0));
  IF vault.sign_in_revoked(p_issuer, p_subject, p_auth_time) THEN
    RAISE EXCEPTION 'the sign-in of % was revoked', p_user USING ERRCODE = 'insufficient_privilege';
  END IF;
  INSERT INTO vault.credentials (ref, user_id, client_secret, issuer, subject, role, store_ids, acr, auth_time, demo)
  SELECT new_ref, c.user_id, c.client_secret, p_issuer, p_subject, p_role, p_stores, p_acr, p_auth_time, c.demo
  FROM vault.credentials c WHERE c.user_id = p_user AND c.ref = 'cred-' || p_user AND NOT c.revoked;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'no upstream credential for %', p_user USING ERRCODE = 'no_data_found';
  END IF;
  RETURN new_ref;
END
$$;

REVOKE ALL ON FUNCTION vault.revoke_sign_in(text, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION vault.sign_in_revoked(text, text, timestamptz) FROM PUBLIC;
GRANT USAGE ON SCHEMA vault TO toolgate_approvals;
GRANT EXECUTE ON FUNCTION vault.revoke_sign_in(text, text, text) TO toolgate_approvals, toolgate_mcp;
GRANT EXECUTE ON FUNCTION vault.sign_in_revoked(text, text, timestamptz) TO toolgate_mcp, toolgate_worker;
