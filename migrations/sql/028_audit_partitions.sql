-- The audit log kept for years (docs/operating.md, Keeping the audit log).
--
-- audit_log is range-partitioned by month on at. Rows are still never
-- updated or deleted: every partition refuses UPDATE, DELETE and TRUNCATE
-- as the table did. What leaves is a whole month, older than the
-- retention age, archived first and checked against its checksum, dropped
-- by toolgate_retention (which no service holds) through
-- audit_partition_drop, and the drop is itself a row of the log.
--
-- A partitioned table's unique index must hold its partition key, and
-- at is when the row was written, which a retried insert does not repeat:
-- the one row per (workflow_id, run_id, event_key) is kept by audit_keys
-- (each key's SHA-256, a fixed-size row whatever the IDs' lengths), which
-- the insert trigger fills first, skipping the row when its key is there. An insert names no conflict target (ON CONFLICT DO
-- NOTHING, or none): a worker older than this migration names one, which a
-- partitioned table has no index for, so stop older workers first.
--
-- Indexes serve what is read (docs/deploying.md, Sizing): admission counts
-- the admitted rows of a bucket in its window; a run's rows are found by
-- workflow; the insights page reads a period by a BRIN index on at, whole
-- days from audit_daily (filled by the worker's audit_log_count_days once a
-- day has closed), and how long calls and decisions took from each
-- outcome's and decision's seconds, written with the row.

ALTER TABLE audit_log RENAME TO audit_log_before_028;
ALTER SEQUENCE audit_log_id_seq OWNED BY NONE;

CREATE TABLE audit_log (
  id                  bigint NOT NULL DEFAULT nextval('audit_log_id_seq'),
  at                  timestamptz NOT NULL DEFAULT clock_timestamp(),
  event               text NOT NULL CONSTRAINT audit_log_event_check CHECK (event IN ('allowed', 'needs_approval', 'denied',
                        'approval_refused', 'approval_counted', 'edited', 'approved', 'rejected', 'expired', 'executed', 'failed',
                        'escalated', 'awaiting_sign_in', 'released', 'partition_dropped')),
  reason              text NOT NULL,
  tool                text NOT NULL,
  user_id             text NOT NULL,
  role                text NOT NULL,
  session_id          text NOT NULL,
  conversation_id     text NOT NULL,
  args                jsonb,
  store_id            bigint,
  value_cents         bigint,
  workflow_id         text NOT NULL,
  run_id              text NOT NULL,
  event_key           text NOT NULL,
  approver_id         text,
  approver_role       text,
  message             text,
  result              jsonb,
  claimed_approver_id text,
  approver_issuer     text,
  approver_subject    text,
  approver_acr        text,
  approver_auth_time  timestamptz,
  resource_kind       text,
  resource_id         text,
  seconds             double precision,
  version_by          text
) PARTITION BY RANGE (at);
ALTER SEQUENCE audit_log_id_seq OWNED BY audit_log.id;

COMMENT ON TABLE audit_log IS 'Append-only, one row per decision event; partitioned by month on at (migration 028).';
COMMENT ON COLUMN audit_log.workflow_id IS 'The ToolCall workflow ID, also the Idempotency-Key sent upstream.';
COMMENT ON COLUMN audit_log.event_key IS 'Names the event within its run, so a retried or replayed insert never writes a second row (audit_keys).';
COMMENT ON COLUMN audit_log.claimed_approver_id IS 'The approver an unverified decision claimed to be; never shown as that person''s decision.';
COMMENT ON COLUMN audit_log.approver_id IS 'The approver of a verified (signed) decision.';
COMMENT ON COLUMN audit_log.approver_acr IS 'The strength of the approver''s sign-in (pwd, mfa), from the identity provider.';
COMMENT ON COLUMN audit_log.resource_kind IS 'The kind of the resource the call acted on (its pack''s), NULL when it named none.';
COMMENT ON COLUMN audit_log.store_id IS 'Written before resources had kinds; resource_kind and resource_id hold it too.';
COMMENT ON COLUMN audit_log.seconds IS 'On an executed or failed row, seconds since the run''s allowed or approved row (its start upstream); on an approved, rejected or approval_counted row, since the card version it decided went up.';
COMMENT ON COLUMN audit_log.version_by IS 'On an approved, rejected or approval_counted row: who edited the card version it decided ('''' for an edit naming no one), NULL for the card as requested.';

-- One month's partition, created when missing, refusing what the table
-- refuses. It is made apart and then attached, which locks the log against
-- other schema changes only (SHARE UPDATE EXCLUSIVE), never against a
-- call's insert, and gives up after lock_timeout rather than queue behind
-- a long reader. Concurrent callers take turns.
CREATE FUNCTION audit_log_partition(p_month date) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public SET lock_timeout = '5s' AS $$
DECLARE
  m    date := date_trunc('month', p_month)::date;
  name text := 'audit_log_' || to_char(m, 'YYYY_MM');
BEGIN
  PERFORM pg_advisory_xact_lock(hashtext('toolgate:audit_log_partition'));
  IF to_regclass('public.' || name) IS NULL THEN
    EXECUTE format('CREATE TABLE public.%I (LIKE public.audit_log INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', name);
    EXECUTE format('CREATE TRIGGER audit_log_no_update_delete BEFORE UPDATE OR DELETE ON public.%I FOR EACH STATEMENT EXECUTE FUNCTION audit_log_refuse()', name);
    EXECUTE format('CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON public.%I FOR EACH STATEMENT EXECUTE FUNCTION audit_log_refuse()', name);
    EXECUTE format('REVOKE ALL ON public.%I FROM PUBLIC', name);
    EXECUTE format('ALTER TABLE public.audit_log ATTACH PARTITION public.%I FOR VALUES FROM (%L) TO (%L)', name,
                   m::timestamp AT TIME ZONE 'UTC', (m + interval '1 month')::timestamp AT TIME ZONE 'UTC');
  END IF;
  RETURN name;
END
$$;
REVOKE ALL ON FUNCTION audit_log_partition(date) FROM PUBLIC;

-- The partitions of this month and p_ahead months after it (0 to 24).
CREATE FUNCTION audit_log_add_partitions(p_ahead int) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
  IF p_ahead IS NULL OR p_ahead < 0 OR p_ahead > 24 THEN
    RAISE EXCEPTION 'audit_log_add_partitions: months ahead must be 0 to 24, not %', p_ahead;
  END IF;
  FOR i IN 0..p_ahead LOOP
    PERFORM audit_log_partition(((now() AT TIME ZONE 'UTC')::date + make_interval(months => i))::date);
  END LOOP;
END
$$;
REVOKE ALL ON FUNCTION audit_log_add_partitions(int) FROM PUBLIC;

-- Every month the old table holds (and the month before this one), and
-- three ahead.
SELECT audit_log_partition(m::date)
FROM generate_series(date_trunc('month', least((SELECT min(at) FROM audit_log_before_028), now() - interval '1 month') AT TIME ZONE 'UTC'),
                     date_trunc('month', now() AT TIME ZONE 'UTC'), interval '1 month') m;
SELECT audit_log_add_partitions(3);

CREATE TRIGGER audit_log_no_update_delete BEFORE UPDATE OR DELETE ON audit_log
  FOR EACH STATEMENT EXECUTE FUNCTION audit_log_refuse();
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
  FOR EACH STATEMENT EXECUTE FUNCTION audit_log_refuse();

-- Every row moves, each outcome with its seconds.
INSERT INTO audit_log (id, at, event, reason, tool, user_id, role, session_id, conversation_id, args, store_id, value_cents,
                       workflow_id, run_id, event_key, approver_id, approver_role, message, result, claimed_approver_id,
                       approver_issuer, approver_subject, approver_acr, approver_auth_time, resource_kind, resource_id, seconds, version_by)
SELECT id, at, event, reason, tool, user_id, role, session_id, conversation_id, args, store_id, value_cents,
       workflow_id, run_id, event_key, approver_id, approver_role, message, result, claimed_approver_id,
       approver_issuer, approver_subject, approver_acr, approver_auth_time, resource_kind, resource_id,
       CASE WHEN event IN ('executed', 'failed') THEN extract(epoch FROM at - max(at) FILTER (WHERE event IN ('allowed', 'approved')) OVER run)
            WHEN event IN ('approved', 'rejected', 'approval_counted') THEN extract(epoch FROM at - (up).at) END,
       CASE WHEN (up).event = 'edited' THEN coalesce((up).approver_id, '') END
FROM (SELECT o.*, CASE WHEN o.event IN ('approved', 'rejected', 'approval_counted') THEN
               (SELECT u FROM audit_log_before_028 u WHERE u.workflow_id = o.workflow_id AND u.run_id = o.run_id
                AND u.event IN ('needs_approval', 'edited') AND u.id < o.id ORDER BY u.id DESC LIMIT 1) END AS up
      FROM audit_log_before_028 o) moved
WINDOW run AS (PARTITION BY workflow_id, run_id ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING);

-- The one row per event key, by its SHA-256 (length-prefixed, so no two
-- keys share an encoding): a fixed-size row whatever the IDs' lengths.
CREATE FUNCTION audit_key(p_workflow_id text, p_run_id text, p_event_key text) RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT sha256(convert_to(length(p_workflow_id) || ':' || p_workflow_id || length(p_run_id) || ':' || p_run_id || p_event_key, 'UTF8'))
$$;
REVOKE ALL ON FUNCTION audit_key(text, text, text) FROM PUBLIC;
CREATE TABLE audit_keys (
  key bytea PRIMARY KEY,
  at  timestamptz NOT NULL
);
COMMENT ON TABLE audit_keys IS 'One row per audit_log event key, audit_key(workflow_id, run_id, event_key): the uniqueness the partitioned log cannot hold itself.';
REVOKE ALL ON audit_keys FROM PUBLIC;
INSERT INTO audit_keys SELECT audit_key(workflow_id, run_id, event_key), at FROM audit_log_before_028;
CREATE INDEX audit_keys_at ON audit_keys USING brin (at);

DROP TABLE audit_log_before_028;

-- A row whose key is written is skipped; an outcome gets its seconds.
CREATE FUNCTION audit_log_once() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
  IF NEW.event = 'partition_dropped' AND NOT pg_has_role(session_user, 'toolgate_retention', 'MEMBER') THEN
    RAISE EXCEPTION 'audit_log: only the retention login writes partition_dropped (audit_partition_drop)'
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  INSERT INTO audit_keys (key, at) VALUES (audit_key(NEW.workflow_id, NEW.run_id, NEW.event_key), NEW.at)
    ON CONFLICT DO NOTHING;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  NEW.seconds := NULL;
  NEW.version_by := NULL;
  IF NEW.event IN ('executed', 'failed') THEN
    SELECT extract(epoch FROM NEW.at - s.at) INTO NEW.seconds FROM audit_log s
    WHERE s.workflow_id = NEW.workflow_id AND s.run_id = NEW.run_id AND s.event IN ('allowed', 'approved')
    ORDER BY s.id DESC LIMIT 1;
  ELSIF NEW.event IN ('approved', 'rejected', 'approval_counted') THEN
    SELECT extract(epoch FROM NEW.at - u.at), CASE WHEN u.event = 'edited' THEN coalesce(u.approver_id, '') END
    INTO NEW.seconds, NEW.version_by FROM audit_log u
    WHERE u.workflow_id = NEW.workflow_id AND u.run_id = NEW.run_id AND u.event IN ('needs_approval', 'edited')
    ORDER BY u.id DESC LIMIT 1;
  END IF;
  RETURN NEW;
END
$$;
REVOKE ALL ON FUNCTION audit_log_once() FROM PUBLIC;
CREATE TRIGGER audit_log_once BEFORE INSERT ON audit_log FOR EACH ROW EXECUTE FUNCTION audit_log_once();
CREATE TRIGGER audit_log_resource BEFORE INSERT ON audit_log FOR EACH ROW EXECUTE FUNCTION resource_from_store();

CREATE INDEX audit_log_by_workflow ON audit_log (workflow_id, run_id, event_key);
CREATE INDEX audit_log_at ON audit_log USING brin (at) WITH (pages_per_range = 32);
CREATE INDEX audit_log_admitted_by_resource ON audit_log (tool, resource_kind, resource_id, at)
  WHERE event IN ('allowed', 'needs_approval');
CREATE INDEX audit_log_admitted_by_user ON audit_log (tool, user_id, at)
  WHERE event IN ('allowed', 'needs_approval');
CREATE INDEX audit_log_ended ON audit_log (workflow_id, run_id) WHERE event IN ('rejected', 'expired', 'released');
CREATE INDEX audit_log_edits ON audit_log (workflow_id, run_id, id) WHERE event = 'edited';
CREATE INDEX audit_log_decisions ON audit_log (at) INCLUDE (approver_id, event, seconds, version_by)
  WHERE event IN ('approved', 'rejected', 'approval_counted');
CREATE INDEX audit_log_outcomes ON audit_log (at) INCLUDE (seconds, id) WHERE event IN ('executed', 'failed');

-- A service writes what happened, never when, nor the columns the
-- trigger derives: at is the database's clock, id its sequence.
REVOKE ALL ON audit_log FROM PUBLIC;
GRANT SELECT ON audit_log TO toolgate_app, toolgate_worker, toolgate_approvals, toolgate_auditor;
GRANT INSERT (event, reason, tool, user_id, role, session_id, conversation_id, args, store_id, value_cents, workflow_id, run_id, event_key,
              approver_id, approver_role, message, result, claimed_approver_id, approver_issuer, approver_subject, approver_acr,
              approver_auth_time, resource_kind, resource_id)
  ON audit_log TO toolgate_app, toolgate_worker;

-- Whole days of the log, counted once each day has closed: the insights
-- page's charts read a period's closed days here and the rest from the log.
CREATE TABLE audit_days (
  day       date PRIMARY KEY,
  rows      bigint NOT NULL,
  filled_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE audit_daily (
  day           date NOT NULL REFERENCES audit_days (day),
  tool          text NOT NULL,
  resource_kind text,
  resource_id   text,
  event         text NOT NULL,
  reason        text NOT NULL,
  n             bigint NOT NULL
);
CREATE INDEX audit_daily_by_day ON audit_daily (day);
COMMENT ON TABLE audit_days IS 'The UTC days of audit_log counted into audit_daily: a day is counted once, an hour after it ends.';
COMMENT ON TABLE audit_daily IS 'audit_log''s rows of each counted day, by tool, resource, event and reason.';
REVOKE ALL ON audit_days, audit_daily FROM PUBLIC;
GRANT SELECT ON audit_days, audit_daily TO toolgate_auditor;

-- How long after its end a day may still gain a row (a transaction that
-- wrote its row before midnight and commits after it).
CREATE FUNCTION audit_day_closed() RETURNS date LANGUAGE sql STABLE AS $$
  SELECT ((now() - interval '1 hour') AT TIME ZONE 'UTC')::date - 1
$$;
REVOKE ALL ON FUNCTION audit_day_closed() FROM PUBLIC;

-- Counts the closed days not yet counted, oldest first, at most p_days.
CREATE FUNCTION audit_days_fill(p_days int) RETURNS int
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
  d    date;
  last date := audit_day_closed();
  done int := 0;
  n    bigint;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtext('toolgate:audit_days_fill'));
  SELECT max(day) + 1 INTO d FROM audit_days;
  IF d IS NULL THEN
    SELECT (min(at) AT TIME ZONE 'UTC')::date INTO d FROM audit_log;
  END IF;
  WHILE d IS NOT NULL AND d <= last AND done < p_days LOOP
    INSERT INTO audit_days (day, rows) VALUES (d, 0);
    INSERT INTO audit_daily (day, tool, resource_kind, resource_id, event, reason, n)
    SELECT d, tool, resource_kind, resource_id, event, reason, count(*) FROM audit_log
    WHERE at >= d::timestamp AT TIME ZONE 'UTC' AND at < (d + 1)::timestamp AT TIME ZONE 'UTC'
    GROUP BY tool, resource_kind, resource_id, event, reason;
    SELECT coalesce(sum(a.n), 0) INTO n FROM audit_daily a WHERE a.day = d;
    UPDATE audit_days SET rows = n WHERE day = d;
    d := d + 1;
    done := done + 1;
  END LOOP;
  RETURN done;
END
$$;
REVOKE ALL ON FUNCTION audit_days_fill(int) FROM PUBLIC;

-- What the worker runs every few minutes, each in its own transaction: the
-- months ahead, and the closed days counted. It can create and count,
-- nothing else.
CREATE FUNCTION audit_log_add_months() RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
  SELECT audit_log_add_partitions(3)
$$;
REVOKE ALL ON FUNCTION audit_log_add_months() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION audit_log_add_months() TO toolgate_worker;
CREATE FUNCTION audit_log_count_days() RETURNS int
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
  SELECT audit_days_fill(31)
$$;
REVOKE ALL ON FUNCTION audit_log_count_days() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION audit_log_count_days() TO toolgate_worker;

SELECT audit_days_fill(100000);

-- Retention: toolgate_retention archives a month and drops it, through
-- the two functions below and nothing else. No service holds it.
DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'toolgate_retention') THEN
    CREATE ROLE toolgate_retention LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION NOBYPASSRLS;
  END IF;
END
$$;
GRANT SELECT ON audit_log TO toolgate_retention;

-- The youngest a month may be, at its end, when it is dropped. The owner
-- sets it (UPDATE audit_retention SET keep = '7 years').
CREATE TABLE audit_retention (
  one  boolean PRIMARY KEY DEFAULT true CHECK (one),
  keep interval NOT NULL CHECK (keep >= interval '1 month')
);
INSERT INTO audit_retention (keep) VALUES (interval '13 months');
REVOKE ALL ON audit_retention FROM PUBLIC;
GRANT SELECT ON audit_retention TO toolgate_retention;

-- Each month archived: the file, its rows and its SHA-256, and when the
-- month was dropped.
CREATE TABLE audit_archives (
  partition   text PRIMARY KEY,
  starts      timestamptz NOT NULL,
  ends        timestamptz NOT NULL,
  rows        bigint NOT NULL,
  sha256      text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
  rows_sha256 text NOT NULL CHECK (rows_sha256 ~ '^[0-9a-f]{64}$'),
  location    text NOT NULL,
  archived_by text NOT NULL,
  archived_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  dropped_at  timestamptz
);
COMMENT ON TABLE audit_archives IS 'Each month of audit_log archived (a file of its rows, their count, the file''s SHA-256 and the rows'' digest, audit_rows_digest), and when it was dropped.';
REVOKE ALL ON audit_archives FROM PUBLIC;
GRANT SELECT ON audit_archives TO toolgate_retention, toolgate_auditor;

-- A month's bounds, or an error that says what to name.
CREATE FUNCTION audit_partition_bounds(p_partition text, OUT starts timestamptz, OUT ends timestamptz)
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, public AS $$
DECLARE
  m date;
BEGIN
  IF p_partition !~ '^audit_log_[0-9]{4}_[0-9]{2}$' THEN
    RAISE EXCEPTION 'retention: % is not a month of the audit log; name one as audit_log_YYYY_MM', p_partition;
  END IF;
  m := to_date(substr(p_partition, 11), 'YYYY_MM');
  IF NOT EXISTS (SELECT FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                 WHERE i.inhparent = 'public.audit_log'::regclass AND c.relname = p_partition) THEN
    RAISE EXCEPTION 'retention: % is not a partition of audit_log (already dropped, or never made)', p_partition;
  END IF;
  starts := m::timestamp AT TIME ZONE 'UTC';
  ends := (m + interval '1 month')::timestamp AT TIME ZONE 'UTC';
END
$$;
REVOKE ALL ON FUNCTION audit_partition_bounds(text) FROM PUBLIC;

-- The digest of a month's rows as its archive holds them, read by the
-- database itself: each row's to_jsonb text hashed (SHA-256), the hashes of
-- each 100,000 rows in id order hashed together, and those hashed together
-- (insights.ReadArchive computes the same from the file's lines).
CREATE FUNCTION audit_rows_digest(p_starts timestamptz, p_ends timestamptz) RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog, public AS $$
  SELECT encode(sha256(coalesce(string_agg(c.h, ''::bytea ORDER BY c.chunk), ''::bytea)), 'hex')
  FROM (SELECT r.chunk, sha256(string_agg(r.rh, ''::bytea ORDER BY r.id)) AS h
        FROM (SELECT a.id, (row_number() OVER (ORDER BY a.id) - 1) / 100000 AS chunk,
                     sha256(convert_to(to_jsonb(a)::text, 'UTF8')) AS rh
              FROM audit_log a WHERE a.at >= p_starts AND a.at < p_ends) r
        GROUP BY r.chunk) c
$$;
REVOKE ALL ON FUNCTION audit_rows_digest(timestamptz, timestamptz) FROM PUBLIC;

-- Records a month's archive once the month has ended: the archive's row
-- count and rows' digest must be the month's as the database reads them now.
CREATE FUNCTION audit_archive_record(p_partition text, p_rows bigint, p_sha256 text, p_rows_sha256 text, p_location text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
  b record;
  n bigint;
  d text;
BEGIN
  SELECT * INTO b FROM audit_partition_bounds(p_partition);
  IF b.ends > now() THEN
    RAISE EXCEPTION 'retention: % has not ended (it ends %); archive a month once it has', p_partition, b.ends;
  END IF;
  EXECUTE format('LOCK TABLE public.%I IN SHARE MODE', p_partition);
  EXECUTE format('SELECT count(*) FROM public.%I', p_partition) INTO n;
  d := audit_rows_digest(b.starts, b.ends);
  IF n <> p_rows OR d <> p_rows_sha256 THEN
    RAISE EXCEPTION 'retention: the archive of % holds % rows (digest %), the month % (digest %): archive it again', p_partition, p_rows, p_rows_sha256, n, d;
  END IF;
  INSERT INTO audit_archives (partition, starts, ends, rows, sha256, rows_sha256, location, archived_by)
  VALUES (p_partition, b.starts, b.ends, p_rows, p_sha256, d, p_location, session_user)
  ON CONFLICT (partition) DO UPDATE SET rows = EXCLUDED.rows, sha256 = EXCLUDED.sha256, rows_sha256 = EXCLUDED.rows_sha256,
    location = EXCLUDED.location, archived_by = EXCLUDED.archived_by, archived_at = clock_timestamp();
END
$$;
REVOKE ALL ON FUNCTION audit_archive_record(text, bigint, text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION audit_archive_record(text, bigint, text, text, text) TO toolgate_retention;

-- Drops a month: older than audit_retention.keep, archived with the
-- checksum the caller read back from the file, its rows (count and digest)
-- unchanged since. The drop is written to the log first, under a key no one
-- can have taken, in the same transaction; the month's keys go before the
-- month is detached, so the log is locked for the detach alone.
CREATE FUNCTION audit_partition_drop(p_partition text, p_sha256 text) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public SET lock_timeout = '10s' AS $$
DECLARE
  b    record;
  a    audit_archives%ROWTYPE;
  keep interval;
  n    bigint;
  d    text;
BEGIN
  SELECT * INTO b FROM audit_partition_bounds(p_partition);
  SELECT r.keep INTO keep FROM audit_retention r;
  IF b.ends > now() - keep THEN
    RAISE EXCEPTION 'retention: % ended %, less than the % the log is kept (audit_retention.keep)', p_partition, b.ends, keep;
  END IF;
  SELECT * INTO a FROM audit_archives WHERE partition = p_partition;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'retention: % has no archive; archive it first (starter retention archive)', p_partition;
  END IF;
  IF a.sha256 <> p_sha256 THEN
    RAISE EXCEPTION 'retention: the file read back has SHA-256 %, the archive recorded %: it is not the archive', p_sha256, a.sha256;
  END IF;
  EXECUTE format('LOCK TABLE public.%I IN SHARE MODE', p_partition);
  EXECUTE format('SELECT count(*) FROM public.%I', p_partition) INTO n;
  d := audit_rows_digest(b.starts, b.ends);
  IF n <> a.rows OR d <> a.rows_sha256 THEN
    RAISE EXCEPTION 'retention: % holds % rows (digest %), its archive % (digest %): archive it again', p_partition, n, d, a.rows, a.rows_sha256;
  END IF;
  PERFORM pg_advisory_xact_lock(hashtext('toolgate:audit_log_partition'));
  INSERT INTO audit_log (event, reason, tool, user_id, role, session_id, conversation_id, workflow_id, run_id, event_key, message, result)
  VALUES ('partition_dropped', 'retention', '', session_user, 'retention', '', '', 'retention:' || p_partition, gen_random_uuid()::text, 'dropped',
          format('%s dropped: %s rows from %s to %s, archived in %s (SHA-256 %s)', p_partition, n, b.starts, b.ends, a.location, a.sha256),
          jsonb_build_object('partition', p_partition, 'rows', n, 'sha256', a.sha256, 'rowsSha256', a.rows_sha256, 'location', a.location,
                             'starts', b.starts, 'ends', b.ends));
  IF NOT FOUND THEN
    RAISE EXCEPTION 'retention: the drop of % could not be written to the log; nothing dropped', p_partition;
  END IF;
  DELETE FROM audit_keys WHERE at >= b.starts AND at < b.ends;
  EXECUTE format('ALTER TABLE public.audit_log DETACH PARTITION public.%I', p_partition);
  EXECUTE format('DROP TABLE public.%I', p_partition);
  UPDATE audit_archives SET dropped_at = clock_timestamp() WHERE partition = p_partition;
  RETURN n;
END
$$;
REVOKE ALL ON FUNCTION audit_partition_drop(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION audit_partition_drop(text, text) TO toolgate_retention;
