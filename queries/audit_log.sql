-- name: AuditLogInsert :exec
INSERT INTO audit_log (team_id, actor, action, target, before, after)
VALUES (@team_id, @actor, @action, @target, @before, @after);

-- name: AuditLogList :many
-- The newest entries, optionally of one team, of one action, about one member
-- (made by them, naming them as the target, or about one of their keys), and
-- older than @before_id, the keyset of the page before.
SELECT * FROM audit_log
WHERE (sqlc.narg('team_id')::bigint IS NULL OR team_id = sqlc.narg('team_id'))
  AND (sqlc.narg('action')::text IS NULL OR action = sqlc.narg('action'))
  AND (sqlc.narg('member_actor')::text IS NULL OR actor = sqlc.narg('member_actor')
       OR target = sqlc.narg('member_email')::text
       OR after->>'member_id' = sqlc.narg('member_id')::text
       OR before->>'member_id' = sqlc.narg('member_id')::text)
  AND (sqlc.narg('before_id')::bigint IS NULL OR id < sqlc.narg('before_id'))
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
