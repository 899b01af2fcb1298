-- A call whose person must sign in first waits for the credential signal
-- instead of ending; the wait is audited as awaiting_sign_in.
ALTER TABLE audit_log DROP CONSTRAINT audit_log_event_check;
ALTER TABLE audit_log ADD CONSTRAINT audit_log_event_check CHECK (event IN ('allowed', 'needs_approval', 'denied', 'approval_refused',
  'approved', 'rejected', 'expired', 'executed', 'failed', 'escalated', 'awaiting_sign_in'));
