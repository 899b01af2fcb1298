-- A person acts at a pack's upstream without a seeded row: a sign-in's
-- credential may hold a grant from the identity provider (a refresh token
-- issued by token exchange, RFC 8693, to toolgate), which the worker
-- exchanges on each call for an access token whose audience is the
-- tool's pack's upstream alone. A seeded secret now says whose upstream it
-- is for (secret_pack) and goes to the upstream that pack's calls go to
-- and no other. The demo rows and those copied from them are the demo
-- pack's; any other secret written before names no pack, so it goes
-- nowhere until its operator names one (UPDATE ... SET secret_pack).
ALTER TABLE vault.credentials ADD COLUMN grant_token text, ADD COLUMN secret_pack text;
ALTER TABLE vault.credentials ALTER COLUMN client_secret DROP NOT NULL;
UPDATE vault.credentials SET secret_pack = 'mangrove' WHERE client_secret IS NOT NULL AND demo;
-- A row copied from a seeded one by a process that predates the column
-- (a rolling deploy) keeps the pack of the secret it copied.
CREATE FUNCTION vault.secret_pack_of_copy() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.secret_pack IS NULL AND NEW.client_secret IS NOT NULL THEN
    SELECT c.secret_pack INTO NEW.secret_pack FROM vault.credentials c
      WHERE c.ref = 'cred-' || NEW.user_id AND c.user_id = NEW.user_id AND c.client_secret = NEW.client_secret;
  END IF;
  RETURN NEW;
END
$$;
CREATE TRIGGER credentials_secret_pack BEFORE INSERT ON vault.credentials FOR EACH ROW EXECUTE FUNCTION vault.secret_pack_of_copy();
ALTER TABLE vault.credentials
  ADD CONSTRAINT credentials_hold_a_secret_or_a_grant CHECK (client_secret IS NOT NULL OR grant_token IS NOT NULL);
COMMENT ON COLUMN vault.credentials.grant_token IS 'The provider''s grant for this sign-in (RFC 8693 refresh token), exchanged per call for a token to one pack''s upstream.';
COMMENT ON COLUMN vault.credentials.secret_pack IS 'The pack whose upstream client_secret is for; it is sent to no other, and nowhere when NULL.';

-- The credential of a sign-in: the person's seeded secret where they have
-- one (with its pack), the grant where the MCP server got one, and at
-- least one of the two. An earlier MCP server calls it without a grant.
CREATE OR REPLACE FUNCTION vault.issue_for_sign_in_grant(p_user text, p_issuer text, p_subject text, p_role text, p_resources jsonb, p_acr text, p_auth_time timestamptz, p_grant text)
RETURNS text LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, vault AS $$
DECLARE
  new_ref text := 'cr_' || replace(gen_random_uuid()::text, '-', '');
  seeded vault.credentials%ROWTYPE;
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
  SELECT * INTO seeded FROM vault.credentials c WHERE c.user_id = p_user AND c.ref = 'cred-' || p_user AND NOT c.revoked;
  IF seeded.ref IS NULL AND coalesce(p_grant, '') = '' THEN
    RAISE EXCEPTION 'no upstream credential for %: no seeded secret and no grant from the provider', p_user USING ERRCODE = 'no_data_found';
  END IF;
  INSERT INTO vault.credentials (ref, user_id, client_secret, secret_pack, grant_token, issuer, subject, role, resources, acr, auth_time, demo)
  VALUES (new_ref, p_user, seeded.client_secret, seeded.secret_pack, nullif(p_grant, ''), p_issuer, p_subject, p_role, coalesce(p_resources, '{}'),
          p_acr, p_auth_time, coalesce(seeded.demo, false));
  RETURN new_ref;
END
$$;
REVOKE ALL ON FUNCTION vault.issue_for_sign_in_grant(text, text, text, text, jsonb, text, timestamptz, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION vault.issue_for_sign_in_grant(text, text, text, text, jsonb, text, timestamptz, text) TO toolgate_mcp;

CREATE OR REPLACE FUNCTION vault.issue_for_sign_in_resources(p_user text, p_issuer text, p_subject text, p_role text, p_resources jsonb, p_acr text, p_auth_time timestamptz)
RETURNS text LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, vault AS $$
  SELECT vault.issue_for_sign_in_grant(p_user, p_issuer, p_subject, p_role, p_resources, p_acr, p_auth_time, NULL)
$$;

CREATE OR REPLACE FUNCTION vault.issue_for_sign_in(p_user text, p_issuer text, p_subject text, p_role text, p_stores bigint[], p_acr text, p_auth_time timestamptz)
RETURNS text LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, vault AS $$
  SELECT vault.issue_for_sign_in_grant(p_user, p_issuer, p_subject, p_role,
    jsonb_build_object('store', (SELECT coalesce(jsonb_agg(s::text), '[]') FROM unnest(p_stores) s)), p_acr, p_auth_time, NULL)
$$;
