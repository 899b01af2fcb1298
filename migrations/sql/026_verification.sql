-- A caller's verified tier (policy.Verification): what they proved in one
-- conversation, and the wrong answers and lockout that outlast it.
--
-- A factor the caller speaks (a passphrase, a one-time code) is sealed by
-- the MCP server before the call starts, so the call's history, logs and
-- audit rows hold only a one-time reference; the worker opens it once,
-- for the one verification call it was sealed for, and it is gone.
CREATE TABLE vault.sealed_factors (
  ref            text PRIMARY KEY,
  credential_ref text NOT NULL,
  tool           text NOT NULL,
  factor         text NOT NULL,
  sealed_at      timestamptz NOT NULL DEFAULT clock_timestamp()
);
COMMENT ON TABLE vault.sealed_factors IS 'Factors a caller spoke, sealed by the MCP server for one verification call; opened (and deleted) once by the worker.';

-- How long a sealed factor waits for its call.
CREATE FUNCTION vault.seal_factor(p_credential text, p_tool text, p_factor text)
RETURNS text LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, vault AS $$
DECLARE
  new_ref text := 'sf_' || replace(gen_random_uuid()::text, '-', '');
BEGIN
  IF coalesce(p_credential, '') = '' OR NOT EXISTS (SELECT 1 FROM vault.credentials WHERE ref = p_credential AND NOT revoked) THEN
    RAISE EXCEPTION 'a factor is sealed for a signed-in caller''s credential' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF length(coalesce(p_factor, '')) NOT BETWEEN 1 AND 256 THEN
    RAISE EXCEPTION 'a factor is 1 to 256 characters' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  DELETE FROM vault.sealed_factors WHERE sealed_at < clock_timestamp() - interval '10 minutes';
  INSERT INTO vault.sealed_factors (ref, credential_ref, tool, factor) VALUES (new_ref, p_credential, p_tool, p_factor);
  RETURN 'sealed:' || new_ref;
END
$$;
REVOKE ALL ON FUNCTION vault.seal_factor(text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION vault.seal_factor(text, text, text) TO toolgate_mcp;

-- Opens a sealed factor once: for the credential and tool it was sealed
-- for, within 10 minutes; NULL otherwise. Opening deletes it, and any seal
-- older than that, opened or not.
CREATE FUNCTION vault.open_factor(p_ref text, p_credential text, p_tool text)
RETURNS text LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, vault AS $$
DECLARE
  said text;
BEGIN
  DELETE FROM vault.sealed_factors WHERE sealed_at < clock_timestamp() - interval '10 minutes';
  DELETE FROM vault.sealed_factors
  WHERE ref = substr(p_ref, length('sealed:') + 1) AND p_ref LIKE 'sealed:%' AND credential_ref = p_credential AND tool = p_tool
  RETURNING factor INTO said;
  RETURN said;
END
$$;
REVOKE ALL ON FUNCTION vault.open_factor(text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION vault.open_factor(text, text, text) TO toolgate_worker;

-- One person's standing with one pack, across every conversation: wrong
-- answers by factor since their last match, and the lockout, which only a
-- person ends (hand_back_caller).
CREATE TABLE caller_verification (
  pack          text NOT NULL,
  issuer        text NOT NULL,
  subject       text NOT NULL,
  failures      jsonb NOT NULL DEFAULT '{}'::jsonb,
  locked_at     timestamptz,
  locked_factor text,
  PRIMARY KEY (pack, issuer, subject)
);

-- Tiers earned, each in one conversation of one sign-in (its credential),
-- until it expires.
CREATE TABLE caller_tiers (
  pack            text NOT NULL,
  issuer          text NOT NULL,
  subject         text NOT NULL,
  conversation_id text NOT NULL,
  credential_ref  text NOT NULL,
  factor          text NOT NULL,
  tier            text NOT NULL,
  workflow_id     text NOT NULL,
  granted_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
  expires_at      timestamptz NOT NULL,
  PRIMARY KEY (pack, issuer, subject, conversation_id, credential_ref, factor)
);

-- Who handed a locked-out caller back, when, and what the lockout was.
CREATE TABLE caller_hand_backs (
  id            bigserial PRIMARY KEY,
  pack          text NOT NULL,
  issuer        text NOT NULL,
  subject       text NOT NULL,
  handed_by     text NOT NULL CHECK (handed_by <> ''),
  note          text NOT NULL DEFAULT '',
  locked_at     timestamptz,
  locked_factor text,
  failures      jsonb,
  at            timestamptz NOT NULL DEFAULT clock_timestamp()
);

GRANT SELECT, INSERT, UPDATE ON caller_verification TO toolgate_worker;

-- The database holds the lockout too: only hand_back_caller (the owner's)
-- ends one or forgets a locked person's answers, and no tier is granted
-- to a locked-out person, whatever a service's connection says.
CREATE FUNCTION caller_lockout_holds() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_TABLE_NAME = 'caller_verification' THEN
    IF OLD.locked_at IS NOT NULL AND (NEW.locked_at IS DISTINCT FROM OLD.locked_at OR NEW.failures IS DISTINCT FROM OLD.failures)
       AND current_user <> (SELECT tableowner FROM pg_tables WHERE schemaname = 'public' AND tablename = 'caller_verification') THEN
      RAISE EXCEPTION 'a lockout ends only by a person''s hand-back (hand_back_caller)' USING ERRCODE = 'insufficient_privilege';
    END IF;
  ELSIF EXISTS (SELECT 1 FROM caller_verification v WHERE v.pack = NEW.pack AND v.issuer = NEW.issuer AND v.subject = NEW.subject AND v.locked_at IS NOT NULL) THEN
    RAISE EXCEPTION 'no tier is granted to a locked-out person' USING ERRCODE = 'insufficient_privilege';
  END IF;
  RETURN NEW;
END
$$;
CREATE TRIGGER caller_verification_lockout BEFORE UPDATE ON caller_verification FOR EACH ROW EXECUTE FUNCTION caller_lockout_holds();
CREATE TRIGGER caller_tiers_lockout BEFORE INSERT OR UPDATE ON caller_tiers FOR EACH ROW EXECUTE FUNCTION caller_lockout_holds();
GRANT SELECT, INSERT, UPDATE, DELETE ON caller_tiers TO toolgate_worker;
GRANT SELECT ON caller_hand_backs TO toolgate_worker;

-- A person ends a lockout: the wrong answers are forgotten, the lockout is
-- recorded as handed back, by whom. Only the owner and the roles granted
-- it may; no service does it on its own.
CREATE FUNCTION hand_back_caller(p_pack text, p_issuer text, p_subject text, p_by text, p_note text)
RETURNS boolean LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
  was caller_verification%ROWTYPE;
BEGIN
  IF coalesce(p_by, '') = '' THEN
    RAISE EXCEPTION 'a hand-back names the person who made it' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  SELECT * INTO was FROM caller_verification WHERE pack = p_pack AND issuer = p_issuer AND subject = p_subject FOR UPDATE;
  IF NOT FOUND OR (was.locked_at IS NULL AND was.failures = '{}'::jsonb) THEN
    RETURN false;
  END IF;
  INSERT INTO caller_hand_backs (pack, issuer, subject, handed_by, note, locked_at, locked_factor, failures)
  VALUES (p_pack, p_issuer, p_subject, p_by, coalesce(p_note, ''), was.locked_at, was.locked_factor, was.failures);
  UPDATE caller_verification SET failures = '{}'::jsonb, locked_at = NULL, locked_factor = NULL
  WHERE pack = p_pack AND issuer = p_issuer AND subject = p_subject;
  RETURN true;
END
$$;
REVOKE ALL ON FUNCTION hand_back_caller(text, text, text, text, text) FROM PUBLIC;
