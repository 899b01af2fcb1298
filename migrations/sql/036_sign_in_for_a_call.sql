-- Sign-in by URL (MCP's URL elicitation): a call that waits for its
-- requester to sign in sends them to the card UI, which signs them in with
-- what the call needs and issues the credential of that sign-in itself, as
-- the MCP server does for a bearer token (vault.issue_for_sign_in_grant
-- holds both to the same rules: a revoked sign-in gets none, a seeded
-- secret goes to its own person alone). The card UI records the sign-in in
-- sign_in_log as signed_in_for_call, naming the call it carried on.
GRANT EXECUTE ON FUNCTION vault.issue_for_sign_in_grant(text, text, text, text, jsonb, text, timestamptz, text) TO toolgate_approvals;

ALTER TABLE sign_in_log DROP CONSTRAINT sign_in_log_event_check;
ALTER TABLE sign_in_log ADD CONSTRAINT sign_in_log_event_check
  CHECK (event IN ('signed_in', 'stepped_up', 'sign_in_failed', 'signed_out', 'session_revoked', 'signed_in_for_call'));
