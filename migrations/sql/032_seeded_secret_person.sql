-- A seeded upstream secret is one person's: the issuer and subject of
-- their sign-in, not a user ID, which is an identity provider's display
-- name (preferred_username) that two accounts may hold (OpenID Connect
-- Core 5.7). Before this, a second account named alice copied alice's
-- seeded secret into its credential, and the worker called alice's
-- upstream as alice. Now a sign-in copies the row cred-<user> only when
-- the row names that sign-in's issuer and subject; a row that names none
-- goes to nobody until an operator binds it:
--   UPDATE vault.credentials SET issuer = '<issuer>', subject = '<sub>' WHERE ref = 'cred-<user>';
-- The demo rows (demo, usable in dev mode alone) still go by user ID.
--
-- A credential copied before this from a row that names no sign-in may be
-- another person's copy, and nothing tells which: each is revoked, so its
-- person signs in again once the operator has bound the row.
UPDATE vault.credentials c SET revoked = true
FROM vault.credentials s
WHERE s.ref = 'cred-' || s.user_id AND NOT s.demo AND (s.issuer IS NULL OR s.subject IS NULL)
  AND c.user_id = s.user_id AND c.ref <> s.ref AND NOT c.demo AND NOT c.revoked
  AND c.client_secret IS NOT NULL AND c.client_secret = s.client_secret;

CREATE OR REPLACE FUNCTION vault.issue_for_sign_in_grant(p_user text, p_issuer text, p_subject text, p_role text, p_resources jsonb, p_acr text, p_auth_time timestamptz, p_grant text)
RETURNS text LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, vault, pg_temp AS $$
DECLARE
  new_ref text := 'cr_' || replace(gen_random_uuid()::text, '-', '');
  seeded vault.credentials%ROWTYPE;
  unbound boolean;
BEGIN
  IF coalesce(p_issuer, '') = '' OR coalesce(p_subject, '') = '' THEN
    RAISE EXCEPTION 'a credential is issued to a sign-in that names an issuer and a subject' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF jsonb_typeof(coalesce(p_resources, '{}')) <> 'object' THEN
    RAISE EXCEPTION 'resources are an object of lists by kind' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  PERFORM pg_advisory_xact_lock(hashtextextended('toolgate-sign-in:' || p_issuer || '|' || p_subject, 0));
  IF vault.sign_in_revoked(p_issuer, p_subject, p_auth_time) THEN
    RAISE EXCEPTION 'the sign-in of % was revoked', p_user USING ERRCODE = 'insufficient_privilege';
  END IF;
  SELECT * INTO seeded FROM vault.credentials c WHERE c.user_id = p_user AND c.ref = 'cred-' || p_user AND NOT c.revoked
    AND (c.demo OR (c.issuer = p_issuer AND c.subject = p_subject));
  IF seeded.ref IS NULL AND coalesce(p_grant, '') = '' THEN
    SELECT EXISTS (SELECT 1 FROM vault.credentials c WHERE c.user_id = p_user AND c.ref = 'cred-' || p_user AND NOT c.revoked AND NOT c.demo
      AND (c.issuer IS NULL OR c.subject IS NULL)) INTO unbound;
    IF unbound THEN
      RAISE EXCEPTION 'the seeded secret cred-% names no sign-in, so it goes to nobody: an operator binds it to its person (UPDATE vault.credentials SET issuer = ..., subject = ... WHERE ref = ''cred-%'')', p_user, p_user
        USING ERRCODE = 'no_data_found';
    END IF;
    RAISE EXCEPTION 'no upstream credential for %: no seeded secret of this sign-in and no grant from the provider', p_user USING ERRCODE = 'no_data_found';
  END IF;
  INSERT INTO vault.credentials (ref, user_id, client_secret, secret_pack, grant_token, issuer, subject, role, resources, acr, auth_time, demo)
  VALUES (new_ref, p_user, seeded.client_secret, seeded.secret_pack, nullif(p_grant, ''), p_issuer, p_subject, p_role, coalesce(p_resources, '{}'),
          p_acr, p_auth_time, coalesce(seeded.demo, false));
  RETURN new_ref;
END
$$;
