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
  DELETE FROM vault.sealed_factors WHERE sealed_at < clock_timestamp() - interval '1 hour';
  INSERT INTO vault.sealed_factors (ref, credential_ref, tool, factor) VALUES (new_ref, p_credential, p_tool, p_factor);
  RETURN 'sealed:' || new_ref;
END
$$;
REVOKE ALL ON FUNCTION vault.seal_factor(text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION vault.seal_factor(text, text, text) TO toolgate_mcp;

-- Opens a sealed factor once: for the credential and tool it was sealed
-- for, within 30 minutes; NULL otherwise. Opening deletes it.
CREATE FUNCTION vault.open_factor(p_ref text, p_credential text, p_tool text)
RETURNS text LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, vault AS $$
  DELETE FROM vault.sealed_factors
  WHERE ref = substr(p_ref, length('sealed:') + 1) AND p_ref LIKE 'sealed:%'
    AND credential_ref = p_credential AND tool = p_tool AND sealed_at > clock_timestamp() - interval '30 minutes'
  RETURNING factor
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

-- Tiers earned, each in one conversation, until it expires.
CREATE TABLE caller_tiers (
  pack            text NOT NULL,
  issuer          text NOT NULL,
  subject         text NOT NULL,
  conversation_id text NOT NULL,
  factor          text NOT NULL,
  tier            text NOT NULL,
  workflow_id     text NOT NULL,
  granted_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
  expires_at      timestamptz NOT NULL,
  PRIMARY KEY (pack, issuer, subject, conversation_id, factor)
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
