-- The card UI's inbox reads pending cards only, by the role a card is
-- routed or escalated to and the resource it names, newest first
-- (approvals/server.go, inboxSQL): partial indexes that decided cards never
-- enter, so the inbox costs the same with 100 or 100,000 cards pending and
-- any number decided.
DROP INDEX pending_action_inbox;
DROP INDEX pending_action_by_resource;
CREATE INDEX pending_action_for_role ON pending_action (approver_role, resource_kind, resource_id, created_at)
  WHERE status = 'pending_approval';
CREATE INDEX pending_action_for_escalated ON pending_action (escalated_role, resource_kind, resource_id, created_at)
  WHERE status = 'pending_approval' AND escalated_role IS NOT NULL;
-- A card that names no resource: IS NULL is no equality an index can
-- order by, so these have their own, ordered by when they went up.
CREATE INDEX pending_action_for_role_anywhere ON pending_action (approver_role, created_at)
  WHERE status = 'pending_approval' AND resource_kind IS NULL;
CREATE INDEX pending_action_for_escalated_anywhere ON pending_action (escalated_role, created_at)
  WHERE status = 'pending_approval' AND resource_kind IS NULL AND escalated_role IS NOT NULL;
-- The worker's gauge of cards pending (internal/metrics).
CREATE INDEX pending_action_open ON pending_action (expires_at) WHERE status = 'pending_approval';
