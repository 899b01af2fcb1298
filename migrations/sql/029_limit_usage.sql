-- What a limit counts, kept as it is written: one row per admitted call
-- (an audit row allowed or needs_approval) at its current value, gone once
-- the call gives back what it reserved (rejected, expired, released). A
-- count reads a bucket's window from one index, however much history the
-- bucket has and however many months the log keeps; before, it read the
-- window's rows of the log and looked each one up again for a release and
-- an edit. The log stays the truth: a trigger on its insert keeps this
-- table, in the transaction that writes the row, so a count sees exactly
-- what the log would give (activities.UsageFromLog, tested side by side).
CREATE TABLE limit_usage (
  workflow_id    text NOT NULL,
  run_id         text NOT NULL,
  id             bigint NOT NULL,
  at             timestamptz NOT NULL,
  event          text NOT NULL,
  tool           text NOT NULL,
  resource_kind  text,
  resource_id    text,
  user_id        text NOT NULL,
  admitted_cents bigint,
  value_cents    bigint,
  PRIMARY KEY (workflow_id, run_id, id)
);
COMMENT ON TABLE limit_usage IS 'The admitted calls of the last limit_usage_keep() (32 days) that still hold what they reserved, at their current value; kept by the audit_log insert trigger limit_usage_keep_row (migration 029).';
COMMENT ON COLUMN limit_usage.id IS 'The audit_log row (allowed or needs_approval) that admitted the call.';
COMMENT ON COLUMN limit_usage.value_cents IS 'What the call counts against a spend limit: its latest edit''s value, or what it was admitted at.';
REVOKE ALL ON limit_usage FROM PUBLIC;
CREATE INDEX limit_usage_by_resource ON limit_usage (tool, resource_kind, resource_id, at) INCLUDE (value_cents);
CREATE INDEX limit_usage_by_user ON limit_usage (tool, user_id, at) INCLUDE (value_cents);
CREATE INDEX limit_usage_at ON limit_usage (at);

-- What the ledger keeps: the longest window a limit may count over
-- (policy.MaxWindow, 31 days) and a day, so a trim never takes a row that
-- an admission waiting for its bucket's lock, whose window began at its
-- own transaction's start, still counts.
CREATE FUNCTION limit_usage_keep() RETURNS interval
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT interval '32 days' $$;
REVOKE ALL ON FUNCTION limit_usage_keep() FROM PUBLIC;

CREATE FUNCTION limit_usage_keep_row() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
  IF NEW.event IN ('allowed', 'needs_approval') THEN
    INSERT INTO public.limit_usage (workflow_id, run_id, id, at, event, tool, resource_kind, resource_id, user_id, admitted_cents, value_cents)
    VALUES (NEW.workflow_id, NEW.run_id, NEW.id, NEW.at, NEW.event, NEW.tool, NEW.resource_kind, NEW.resource_id, NEW.user_id,
            NEW.value_cents, NEW.value_cents);
  ELSIF NEW.event IN ('rejected', 'expired', 'released') THEN
    DELETE FROM public.limit_usage WHERE workflow_id = NEW.workflow_id AND run_id = NEW.run_id;
  ELSIF NEW.event = 'edited' THEN
    UPDATE public.limit_usage SET value_cents = coalesce(NEW.value_cents, admitted_cents)
    WHERE workflow_id = NEW.workflow_id AND run_id = NEW.run_id AND event = 'needs_approval';
  END IF;
  RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION limit_usage_keep_row() FROM PUBLIC;
-- AFTER: a row the event keys skip (audit_log_once) never reaches it. It
-- assumes the order the workflow writes a call's rows in: its admission,
-- then its edits, then what ends it (a release or edit written before the
-- admission it belongs to is not applied to it).
--
-- Creating it holds off the log's inserts until this migration commits,
-- so the fill below misses no row; calls wait while it runs (it reads the
-- last 32 days), and the migration gives up rather than queue behind a
-- long reader of the log.
SET LOCAL lock_timeout = '10s';
CREATE TRIGGER limit_usage_keep_row AFTER INSERT ON audit_log FOR EACH ROW EXECUTE FUNCTION limit_usage_keep_row();

-- What the log holds now: the admitted calls of the kept window that
-- gave nothing back, each at its latest edit's value (an edit or a release
-- comes after its admission, so both are looked for in the window alone).
INSERT INTO limit_usage (workflow_id, run_id, id, at, event, tool, resource_kind, resource_id, user_id, admitted_cents, value_cents)
SELECT a.workflow_id, a.run_id, a.id, a.at, a.event, a.tool, a.resource_kind, a.resource_id, a.user_id, a.value_cents,
       CASE WHEN a.event = 'needs_approval' THEN coalesce((SELECT e.value_cents FROM audit_log e
         WHERE e.workflow_id = a.workflow_id AND e.run_id = a.run_id AND e.event = 'edited' AND e.at > now() - limit_usage_keep()
         ORDER BY e.id DESC LIMIT 1), a.value_cents)
       ELSE a.value_cents END
FROM audit_log a
WHERE a.event IN ('allowed', 'needs_approval') AND a.at > now() - limit_usage_keep()
  AND NOT EXISTS (SELECT 1 FROM audit_log d WHERE d.workflow_id = a.workflow_id AND d.run_id = a.run_id
                  AND d.event IN ('rejected', 'expired', 'released') AND d.at > now() - limit_usage_keep());

-- The worker trims what no window can reach, every 10 minutes
-- (internal/app/worker.go); it returns the rows it let go.
CREATE FUNCTION limit_usage_trim() RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
  WITH gone AS (DELETE FROM public.limit_usage WHERE at < now() - public.limit_usage_keep() RETURNING 1)
  SELECT count(*) FROM gone
$$;
REVOKE ALL ON FUNCTION limit_usage_trim() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION limit_usage_trim() TO toolgate_worker;
GRANT SELECT ON limit_usage TO toolgate_worker;
