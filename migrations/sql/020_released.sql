-- A limit counts what happened: a call admitted against a limit and then
-- refused before anything was sent upstream (its credential gone, its
-- sign-in short of the tool's requester tier) gives its reservation back.
-- The row that says so, released, is written in the transaction that
-- records the call's end, and admission leaves the call out from then on.
ALTER TABLE audit_log DROP CONSTRAINT audit_log_event_check;
ALTER TABLE audit_log ADD CONSTRAINT audit_log_event_check CHECK (event IN ('allowed', 'needs_approval', 'denied', 'approval_refused',
  'approval_counted', 'edited', 'approved', 'rejected', 'expired', 'executed', 'failed', 'escalated', 'awaiting_sign_in', 'released'));
