-- name: AuditLogInsert :exec
INSERT INTO audit_log (team_id, actor, action, target, before, after)
VALUES (@team_id, @actor, @action, @target, @before, @after);

-- name: AuditLogList :many
SELECT * FROM audit_log
WHERE (sqlc.narg('team_id')::bigint IS NULL OR team_id = sqlc.narg('team_id'))
ORDER BY id DESC
LIMIT @max_rows;

-- name: AuditLogPage :many
-- One page of a team's audit log, newest first: entries older than @before_id
-- (NULL: the newest).
SELECT * FROM audit_log
WHERE team_id = @team_id
  AND (sqlc.narg('before_id')::bigint IS NULL OR id < sqlc.narg('before_id'))
ORDER BY id DESC
LIMIT @max_rows;
