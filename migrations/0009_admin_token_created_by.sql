-- +goose Up
-- Who made each admin token (its creator as the audit log names them), shown
-- on the owners' tokens page. Tokens made before this column take it from
-- their audit row; '' only if that row is gone.
ALTER TABLE admin_token ADD COLUMN created_by text NOT NULL DEFAULT '';
UPDATE admin_token t SET created_by = a.actor
FROM audit_log a
WHERE a.action = 'admin_token.create' AND a.target = t.id;

-- +goose Down
ALTER TABLE admin_token DROP COLUMN created_by;
