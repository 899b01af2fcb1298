-- Sign-in by URL (MCP's URL elicitation): a call that waits for its
-- requester to sign in sends them to the card UI, which signs them in with
-- what the call needs and records that sign-in for the call here. It
-- issues no credential and sends no signal itself: the MCP server does,
-- when the client that started the call retries with its sealed
-- requestState under the same person's bearer token, so what binds the
-- sign-in to the call is the MCP server's own seal and token check, never
-- a workflow's memo, which any Temporal client could have written.
--
-- A row is the card UI's word that this person (issuer, subject) signed in
-- with this acr at this time for this call; the MCP server takes it once
-- (take_call_sign_in deletes it) and within 15 minutes. The card UI's role
-- records, and nothing else; the MCP server's role takes, and nothing else.
CREATE TABLE call_sign_ins (
  workflow_id text NOT NULL,
  issuer      text NOT NULL,
  subject     text NOT NULL,
  acr         text NOT NULL,
  auth_time   timestamptz NOT NULL,
  at          timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (workflow_id, issuer, subject)
);
CREATE INDEX call_sign_ins_at ON call_sign_ins (at);
COMMENT ON TABLE call_sign_ins IS 'Sign-ins the card UI made for a waiting call (sign-in by URL), until the MCP server takes each once (take_call_sign_in) or 15 minutes pass.';
REVOKE ALL ON call_sign_ins FROM PUBLIC;

CREATE FUNCTION record_call_sign_in(p_workflow text, p_issuer text, p_subject text, p_acr text, p_auth_time timestamptz) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
  DELETE FROM public.call_sign_ins WHERE (workflow_id, issuer, subject) IN
    (SELECT workflow_id, issuer, subject FROM public.call_sign_ins WHERE at < now() - interval '15 minutes' LIMIT 100);
  INSERT INTO public.call_sign_ins (workflow_id, issuer, subject, acr, auth_time) VALUES (p_workflow, p_issuer, p_subject, p_acr, p_auth_time)
  ON CONFLICT (workflow_id, issuer, subject) DO UPDATE SET acr = excluded.acr, auth_time = excluded.auth_time, at = now();
$$;
REVOKE ALL ON FUNCTION record_call_sign_in(text, text, text, text, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION record_call_sign_in(text, text, text, text, timestamptz) TO toolgate_approvals;

CREATE FUNCTION take_call_sign_in(p_workflow text, p_issuer text, p_subject text, OUT acr text, OUT auth_time timestamptz)
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
  DELETE FROM public.call_sign_ins WHERE workflow_id = p_workflow AND issuer = p_issuer AND subject = p_subject
    AND at >= now() - interval '15 minutes'
  RETURNING acr, auth_time;
$$;
REVOKE ALL ON FUNCTION take_call_sign_in(text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION take_call_sign_in(text, text, text) TO toolgate_mcp;

ALTER TABLE sign_in_log DROP CONSTRAINT sign_in_log_event_check;
ALTER TABLE sign_in_log ADD CONSTRAINT sign_in_log_event_check
  CHECK (event IN ('signed_in', 'stepped_up', 'sign_in_failed', 'signed_out', 'session_revoked', 'signed_in_for_call'));
