-- Resources, not stores: a call acts on one resource of a kind its pack
-- names ({"kind": "portal", "id": "PRT-40122"}), and a sign-in grants
-- resources by kind ({"portal": ["PRT-40122"]}). The numeric store columns
-- stay for the rows written before and are no longer written by this
-- version; a row an earlier version still writes during a rolling deploy
-- gets its resource from them on insert, so limits count it.

CREATE FUNCTION resource_from_store() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.resource_kind IS NULL AND NEW.store_id IS NOT NULL AND NEW.store_id <> 0 THEN
    NEW.resource_kind := 'store';
    NEW.resource_id := NEW.store_id::text;
  END IF;
  RETURN NEW;
END
$$;

CREATE FUNCTION resources_from_stores() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF (NEW.resources IS NULL OR NEW.resources = '{}'::jsonb) AND NEW.store_ids IS NOT NULL THEN
    NEW.resources := jsonb_build_object('store', (SELECT coalesce(jsonb_agg(s::text), '[]') FROM unnest(NEW.store_ids) s));
  END IF;
  RETURN NEW;
END
$$;

-- The audit log is append-only: its existing rows get their resource by
-- the table rewrite of ALTER COLUMN ... USING, which no UPDATE trigger
-- sees and which changes no value a row recorded.
ALTER TABLE audit_log ADD COLUMN resource_kind text, ADD COLUMN resource_id text;
ALTER TABLE audit_log
  ALTER COLUMN resource_kind TYPE text USING (CASE WHEN store_id IS NOT NULL THEN 'store' END),
  ALTER COLUMN resource_id TYPE text USING (store_id::text);
CREATE INDEX audit_log_by_resource ON audit_log (tool, resource_kind, resource_id, at);
CREATE TRIGGER audit_log_resource BEFORE INSERT ON audit_log FOR EACH ROW EXECUTE FUNCTION resource_from_store();
COMMENT ON COLUMN audit_log.resource_kind IS 'The kind of the resource the call acted on (its pack''s), NULL when it named none.';
COMMENT ON COLUMN audit_log.store_id IS 'Written before resources had kinds; resource_kind and resource_id hold it too.';

ALTER TABLE pending_action ADD COLUMN resource_kind text, ADD COLUMN resource_id text;
UPDATE pending_action SET resource_kind = 'store', resource_id = store_id::text WHERE store_id <> 0;
ALTER TABLE pending_action ALTER COLUMN store_id DROP NOT NULL;
CREATE INDEX pending_action_by_resource ON pending_action (status, resource_kind, resource_id, expires_at);
CREATE TRIGGER pending_action_resource BEFORE INSERT OR UPDATE ON pending_action FOR EACH ROW EXECUTE FUNCTION resource_from_store();

ALTER TABLE approver_sessions ADD COLUMN resources jsonb NOT NULL DEFAULT '{}';
UPDATE approver_sessions SET resources = jsonb_build_object('store', (SELECT coalesce(jsonb_agg(s::text), '[]') FROM unnest(store_ids) s));
ALTER TABLE approver_sessions ALTER COLUMN store_ids DROP NOT NULL;
CREATE TRIGGER approver_sessions_resources BEFORE INSERT ON approver_sessions FOR EACH ROW EXECUTE FUNCTION resources_from_stores();

ALTER TABLE vault.credentials ADD COLUMN resources jsonb;
UPDATE vault.credentials SET resources = jsonb_build_object('store', (SELECT coalesce(jsonb_agg(s::text), '[]') FROM unnest(store_ids) s))
  WHERE store_ids IS NOT NULL;
CREATE TRIGGER credentials_resources BEFORE INSERT ON vault.credentials FOR EACH ROW EXECUTE FUNCTION resources_from_stores();

-- issue_for_sign_in, by resources: as before, the credential carries the
-- upstream secret of the person's own seeded row.
CREATE FUNCTION vault.issue_for_sign_in(p_user text, p_issuer text, p_subject text, p_role text, p_resources jsonb, p_acr text, p_auth_time timestamptz)
RETURNS text LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, vault AS $$
DECLARE
  new_ref text := 'cr_' || replace(gen_random_uuid()::text, '-', '');
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
  INSERT INTO vault.credentials (ref, user_id, client_secret, issuer, subject, role, resources, acr, auth_time, demo)
  SELECT new_ref, c.user_id, c.client_secret, p_issuer, p_subject, p_role, coalesce(p_resources, '{}'), p_acr, p_auth_time, c.demo
  FROM vault.credentials c WHERE c.user_id = p_user AND c.ref = 'cred-' || p_user AND NOT c.revoked;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'no upstream credential for %', p_user USING ERRCODE = 'no_data_found';
  END IF;
  RETURN new_ref;
END
$$;
REVOKE ALL ON FUNCTION vault.issue_for_sign_in(text, text, text, text, jsonb, text, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION vault.issue_for_sign_in(text, text, text, text, jsonb, text, timestamptz) TO toolgate_mcp;
