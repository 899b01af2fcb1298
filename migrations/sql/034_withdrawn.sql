-- A requester may take a pending card back before anyone decides it: the
-- card ends withdrawn, nothing runs, and, like a rejected or expired card,
-- it gives its limit reservation back (limit_usage_keep_row). The row that
-- says so is withdrawn.
--
-- The event's check, and the card's, are replaced NOT VALID: every row
-- passed the narrower check its new one widens, so reading a hundred
-- million of them again would prove nothing, and the new check holds every
-- row written from now on. Replacing them takes each table's lock for this
-- migration's short transaction alone.
-- The log first, then the cards, in the order a card's end writes them.
SET LOCAL lock_timeout = '10s';
ALTER TABLE audit_log DROP CONSTRAINT audit_log_event_check,
  ADD CONSTRAINT audit_log_event_check CHECK (event IN ('allowed', 'needs_approval', 'denied',
    'approval_refused', 'approval_counted', 'edited', 'approved', 'rejected', 'expired', 'executed', 'failed',
    'escalated', 'awaiting_sign_in', 'released', 'partition_dropped', 'withdrawn')) NOT VALID;
ALTER TABLE pending_action DROP CONSTRAINT pending_action_status_check,
  ADD CONSTRAINT pending_action_status_check CHECK (status IN ('pending_approval', 'approved', 'rejected', 'expired', 'executed', 'failed',
    'withdrawn')) NOT VALID;

-- A person's own waiting requests, as the card UI lists them beside their
-- inbox: by the issuer and subject behind each call's credential, among
-- the pending cards alone, so the list costs the same however many cards
-- have been decided.
CREATE INDEX pending_action_mine ON pending_action (requester_issuer, requester_subject, created_at DESC)
  WHERE status = 'pending_approval';

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
  ELSIF NEW.event IN ('rejected', 'expired', 'released', 'withdrawn') THEN
    DELETE FROM public.limit_usage WHERE workflow_id = NEW.workflow_id AND run_id = NEW.run_id;
  ELSIF NEW.event = 'edited' THEN
    UPDATE public.limit_usage SET value_cents = coalesce(NEW.value_cents, admitted_cents)
    WHERE workflow_id = NEW.workflow_id AND run_id = NEW.run_id AND event = 'needs_approval';
  END IF;
  RETURN NULL;
END
$$;
