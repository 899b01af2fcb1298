-- A per-user limit counts a person, not a user ID: the issuer and subject
-- of the sign-in behind the call's credential, which admission reads from
-- the vault and writes on the call's decision row. A provider may give two
-- people one preferred_username, and one person two (OIDC Core 5.7), so a
-- bucket keyed by user ID let one person spend another's limit and a
-- person with two names twice their own.
--
-- A row that names no person (written before this migration, or by a call
-- whose credential names none) counts against every call under its user
-- ID, and a call that names no person counts every row under its user ID:
-- erring towards refusing, a person's calls of the last 32 days count from
-- the first day, and signing out never starts a limit afresh.
--
-- Adding the columns takes the log's lock for this migration's
-- transaction; nothing here rewrites a row.
SET LOCAL lock_timeout = '10s';
ALTER TABLE audit_log ADD COLUMN requester_issuer text, ADD COLUMN requester_subject text;
COMMENT ON COLUMN audit_log.requester_issuer IS 'On a decision row, the issuer of the sign-in behind the call''s credential (vault.credentials), when it names one.';
COMMENT ON COLUMN audit_log.requester_subject IS 'On a decision row, the subject of the sign-in behind the call''s credential, when it names one.';
GRANT INSERT (requester_issuer, requester_subject) ON audit_log TO toolgate_app, toolgate_worker;

ALTER TABLE limit_usage ADD COLUMN requester_issuer text, ADD COLUMN requester_subject text;
COMMENT ON COLUMN limit_usage.requester_subject IS 'The person the call counts against (with requester_issuer); NULL when its credential named none, and then it counts against its user ID.';
-- A person's bucket, empty when it is made; and a user ID's rows that name
-- nobody, which a call that names a person counts besides its own (every
-- row the ledger holds when it is made: building it holds the ledger, and
-- so admissions, for a few seconds at a retailer's 32 days). A user ID's
-- rows, named or not, stay in limit_usage_by_user (029), which a call that
-- names nobody counts.
CREATE INDEX limit_usage_by_person ON limit_usage (tool, requester_issuer, requester_subject, at) INCLUDE (value_cents)
  WHERE requester_subject IS NOT NULL;
CREATE INDEX limit_usage_by_unnamed_user ON limit_usage (tool, user_id, at) INCLUDE (value_cents)
  WHERE requester_subject IS NULL;

-- A row as its month's archive holds it (insights.Archive writes it, and
-- audit_rows_digest hashes it): the columns this migration adds appear only
-- when the row names a person, so a month archived before it keeps the
-- digest its archive recorded, and can still be dropped.
CREATE FUNCTION audit_row_text(a audit_log) RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog, public, pg_temp AS $$
  SELECT (to_jsonb(a) - CASE WHEN a.requester_issuer IS NULL AND a.requester_subject IS NULL
                             THEN ARRAY['requester_issuer', 'requester_subject'] ELSE '{}'::text[] END)::text
$$;
REVOKE ALL ON FUNCTION audit_row_text(audit_log) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION audit_row_text(audit_log) TO toolgate_retention;

CREATE OR REPLACE FUNCTION audit_rows_digest(p_starts timestamptz, p_ends timestamptz) RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog, public, pg_temp AS $$
  SELECT encode(sha256(coalesce(string_agg(c.h, ''::bytea ORDER BY c.chunk), ''::bytea)), 'hex')
  FROM (SELECT r.chunk, sha256(string_agg(r.rh, ''::bytea ORDER BY r.id)) AS h
        FROM (SELECT a.id, (row_number() OVER (ORDER BY a.id) - 1) / 100000 AS chunk,
                     sha256(convert_to(public.audit_row_text(a), 'UTF8')) AS rh
              FROM public.audit_log a WHERE a.at >= p_starts AND a.at < p_ends) r
        GROUP BY r.chunk) c
$$;

CREATE OR REPLACE FUNCTION limit_usage_keep_row() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
  IF NEW.event IN ('allowed', 'needs_approval') THEN
    INSERT INTO public.limit_usage (workflow_id, run_id, id, at, event, tool, resource_kind, resource_id, user_id, admitted_cents, value_cents,
                                    requester_issuer, requester_subject)
    VALUES (NEW.workflow_id, NEW.run_id, NEW.id, NEW.at, NEW.event, NEW.tool, NEW.resource_kind, NEW.resource_id, NEW.user_id,
            NEW.value_cents, NEW.value_cents,
            CASE WHEN NEW.requester_subject <> '' AND NEW.requester_issuer <> '' THEN NEW.requester_issuer END,
            CASE WHEN NEW.requester_subject <> '' AND NEW.requester_issuer <> '' THEN NEW.requester_subject END);
  ELSIF NEW.event IN ('rejected', 'expired', 'released') THEN
    DELETE FROM public.limit_usage WHERE workflow_id = NEW.workflow_id AND run_id = NEW.run_id;
  ELSIF NEW.event = 'edited' THEN
    UPDATE public.limit_usage SET value_cents = coalesce(NEW.value_cents, admitted_cents)
    WHERE workflow_id = NEW.workflow_id AND run_id = NEW.run_id AND event = 'needs_approval';
  END IF;
  RETURN NULL;
END
$$;
