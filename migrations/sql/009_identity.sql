-- Real identity: the evidence an approval carried, the evidence a card
-- needs, the card UI's server-side sessions and its own sign-in audit.

-- Per-person evidence on every decision row: who the identity provider
-- said the approver was, and how strongly, when.
ALTER TABLE audit_log
  ADD COLUMN approver_issuer    text,
  ADD COLUMN approver_subject   text,
  ADD COLUMN approver_acr       text,
  ADD COLUMN approver_auth_time timestamptz;
COMMENT ON COLUMN audit_log.approver_acr IS 'The strength of the approver''s sign-in (pwd, mfa), from the identity provider.';

-- What a card needs of its approver's sign-in, recorded with its verdict.
ALTER TABLE pending_action
  ADD COLUMN required_acr             text,
  ADD COLUMN required_max_age_seconds bigint;

-- The card UI's sessions live here, not in the cookie: the cookie holds a
-- random ID whose SHA-256 is the key, so sign-out, a lock or a role change
-- at the provider ends a session at once, and a copied cookie stops
-- working with it.
CREATE TABLE approver_sessions (
  id_hash      bytea PRIMARY KEY,
  user_id      text NOT NULL,
  name         text NOT NULL,
  role         text NOT NULL,
  store_ids    bigint[] NOT NULL,
  issuer       text NOT NULL,
  subject      text NOT NULL,
  acr          text NOT NULL,
  amr          text[] NOT NULL,
  auth_time    timestamptz NOT NULL,
  provider_sid text,
  created_at   timestamptz NOT NULL DEFAULT now(),
  expires_at   timestamptz NOT NULL
);
CREATE INDEX approver_sessions_by_subject ON approver_sessions (issuer, subject);
GRANT SELECT, INSERT, DELETE ON approver_sessions TO toolgate_approvals;

-- The card UI's own events: sign-ins, step-ups, failures, sign-outs and
-- sessions the provider ended (a lock, a role change). Append-only, like
-- audit_log.
CREATE TABLE sign_in_log (
  id          bigserial PRIMARY KEY,
  at          timestamptz NOT NULL DEFAULT clock_timestamp(),
  event       text NOT NULL CHECK (event IN ('signed_in', 'stepped_up', 'sign_in_failed', 'signed_out', 'session_revoked')),
  user_id     text,
  issuer      text,
  subject     text,
  acr         text,
  amr         text[],
  auth_time   timestamptz,
  workflow_id text,
  message     text NOT NULL
);
CREATE INDEX sign_in_log_by_subject ON sign_in_log (issuer, subject, at);
CREATE FUNCTION append_only_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION '% is append-only: % is refused', TG_TABLE_NAME, TG_OP
    USING ERRCODE = 'insufficient_privilege';
END
$$;
CREATE TRIGGER sign_in_log_no_update_delete BEFORE UPDATE OR DELETE ON sign_in_log
  FOR EACH STATEMENT EXECUTE FUNCTION append_only_refuse();
CREATE TRIGGER sign_in_log_no_truncate BEFORE TRUNCATE ON sign_in_log
  FOR EACH STATEMENT EXECUTE FUNCTION append_only_refuse();
REVOKE ALL ON sign_in_log FROM PUBLIC;
GRANT SELECT, INSERT ON sign_in_log TO toolgate_approvals;
GRANT USAGE ON SEQUENCE sign_in_log_id_seq TO toolgate_approvals;
