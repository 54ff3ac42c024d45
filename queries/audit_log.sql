-- name: AuditLogInsert :exec
INSERT INTO audit_log (team_id, actor, action, target, before, after)
VALUES (@team_id, @actor, @action, @target, @before, @after);

-- name: AuditLogList :many
SELECT * FROM audit_log
WHERE (sqlc.narg('team_id')::bigint IS NULL OR team_id = sqlc.narg('team_id'))
ORDER BY id DESC
LIMIT @max_rows;
