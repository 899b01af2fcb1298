-- The two-person rule: a card may need several distinct approvers. Each
-- approval before the last is audited as approval_counted; the card shows
-- how many it needs and who has approved so far.
ALTER TABLE audit_log DROP CONSTRAINT audit_log_event_check;
ALTER TABLE audit_log ADD CONSTRAINT audit_log_event_check CHECK (event IN ('allowed', 'needs_approval', 'denied', 'approval_refused',
  'approval_counted', 'approved', 'rejected', 'expired', 'executed', 'failed', 'escalated', 'awaiting_sign_in'));
ALTER TABLE pending_action ADD COLUMN approvals_needed integer NOT NULL DEFAULT 1;
ALTER TABLE pending_action ADD COLUMN approvals jsonb;
