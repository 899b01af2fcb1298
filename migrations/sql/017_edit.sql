-- Edit-then-approve: an approver may change a card's editable args; the
-- card goes up again as a new version (audited as edited, with the new
-- value, which the limits then count instead of the old one).
ALTER TABLE audit_log DROP CONSTRAINT audit_log_event_check;
ALTER TABLE audit_log ADD CONSTRAINT audit_log_event_check CHECK (event IN ('allowed', 'needs_approval', 'denied', 'approval_refused',
  'approval_counted', 'edited', 'approved', 'rejected', 'expired', 'executed', 'failed', 'escalated', 'awaiting_sign_in'));
ALTER TABLE pending_action ADD COLUMN card_version integer NOT NULL DEFAULT 1;
ALTER TABLE pending_action ADD COLUMN editable text[];
