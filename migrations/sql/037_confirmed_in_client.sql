-- A requester's decision made in their own MCP client (a form of the card
-- in the agent's host, where the card's row allows it) is evidence weaker
-- than a sign-in at the card UI: its row says so, in approver_via.
--
-- No CHECK: on a partitioned log of years, one would scan every month to
-- validate a column that is NULL in all of them. The worker writes the
-- one value (signoff.ConfirmedInClient), and only on a decision the
-- workflow judged.
ALTER TABLE audit_log ADD COLUMN approver_via text;
COMMENT ON COLUMN audit_log.approver_via IS 'confirmed_in_client on a decision the requester made in their own MCP client (the MCP server signed it with the sign-in behind their token); NULL for one made signed in at the card UI.';
GRANT INSERT (approver_via) ON audit_log TO toolgate_app, toolgate_worker;

-- The column appears in a row's archived text only when it is set, so a
-- month archived before it keeps the digest its archive recorded.
CREATE OR REPLACE FUNCTION audit_row_text(a audit_log) RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog, public, pg_temp AS $$
  SELECT (to_jsonb(a)
          - CASE WHEN a.requester_issuer IS NULL AND a.requester_subject IS NULL
                 THEN ARRAY['requester_issuer', 'requester_subject'] ELSE '{}'::text[] END
          - CASE WHEN a.approver_via IS NULL THEN ARRAY['approver_via'] ELSE '{}'::text[] END)::text
$$;
