-- An MCP input-required result's requestState is single-use (SEP-2322):
-- the MCP server records each one it accepts back, by its sealed ID, until
-- it expires, and refuses it a second time, on any MCP server. Spending
-- one also forgets a few that have expired, so the table holds the last
-- 15 minutes' alone, whatever the log holds.
CREATE TABLE mcp_request_states (
  id         text PRIMARY KEY,
  expires_at timestamptz NOT NULL,
  spent_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX mcp_request_states_expiry ON mcp_request_states (expires_at);
COMMENT ON TABLE mcp_request_states IS 'The requestStates the MCP server accepted back, each once (mcpgate.VaultStates), until they expire.';

CREATE FUNCTION spend_mcp_request_state(p_id text, p_expires timestamptz) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
  spent boolean;
BEGIN
  -- Expired by this clock, whatever the MCP server's said: NULL, never spent.
  IF p_expires <= now() THEN
    RETURN NULL;
  END IF;
  DELETE FROM public.mcp_request_states WHERE id IN (SELECT id FROM public.mcp_request_states WHERE expires_at < now() LIMIT 100);
  INSERT INTO public.mcp_request_states (id, expires_at) VALUES (p_id, p_expires) ON CONFLICT (id) DO NOTHING RETURNING true INTO spent;
  RETURN coalesce(spent, false);
END
$$;
REVOKE ALL ON FUNCTION spend_mcp_request_state(text, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION spend_mcp_request_state(text, timestamptz) TO toolgate_mcp;
