-- An unanswered card is also offered one role up (recorded and audited);
-- its expiry does not move.
ALTER TABLE audit_log DROP CONSTRAINT audit_log_event_check;
ALTER TABLE audit_log ADD CONSTRAINT audit_log_event_check CHECK (event IN ('allowed', 'needs_approval', 'denied', 'approval_refused',
  'approved', 'rejected', 'expired', 'executed', 'failed', 'escalated'));
ALTER TABLE pending_action ADD COLUMN escalated_role text;
