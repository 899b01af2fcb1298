-- A decision whose signature did not verify names an approver it cannot
-- prove; its claim is kept here, apart from approver_id, which holds only
-- verified approvers.
ALTER TABLE audit_log ADD COLUMN claimed_approver_id text;
COMMENT ON COLUMN audit_log.claimed_approver_id IS 'The approver an unverified decision claimed to be; never shown as that person''s decision.';
COMMENT ON COLUMN audit_log.approver_id IS 'The approver of a verified (signed) decision.';
