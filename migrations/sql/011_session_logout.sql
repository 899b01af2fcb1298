-- The ID token a session began with, sent back to the provider as
-- id_token_hint when the approver signs out (RP-initiated logout), so the
-- provider's own session ends too.
ALTER TABLE approver_sessions ADD COLUMN id_token text;
