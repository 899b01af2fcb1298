-- The assistant's own words on why it proposes a call, shown on the card
-- apart from the system-written card line (sanitized at decode).
ALTER TABLE pending_action ADD COLUMN justification text;
