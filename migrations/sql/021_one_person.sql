-- One person is one person: a card names the sign-in behind its
-- requester's credential (issuer and subject), so the card UI knows the
-- requester under any user ID, as the workflow does. The approvals column
-- carries each counted approver's issuer and subject the same way.
ALTER TABLE pending_action
  ADD COLUMN requester_issuer  text,
  ADD COLUMN requester_subject text;
