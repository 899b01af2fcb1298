-- A decision's signature names the card version it is for, so one signed
-- for a version an edit has replaced never counts on a later version with
-- the same args hash. The approvals service signs the version this column
-- holds; 0 on cards put up before versions were signed, whose signatures
-- name none.
ALTER TABLE pending_action ADD COLUMN signed_version integer NOT NULL DEFAULT 0;
