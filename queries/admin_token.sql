-- name: AdminTokenCreate :one
INSERT INTO admin_token (id, team_id, name, role, secret_hash, expires_at, created_by)
VALUES (@id, @team_id, @name, @role, @secret_hash, @expires_at, @created_by)
RETURNING *;

-- name: AdminTokenGet :one
SELECT * FROM admin_token WHERE id = @id;

-- name: AdminTokenList :many
-- A team's tokens, or (team_id NULL) the deployment's.
SELECT * FROM admin_token
WHERE team_id IS NOT DISTINCT FROM sqlc.narg('team_id')::bigint
ORDER BY created_at, id;

-- name: AdminTokenRevoke :one
UPDATE admin_token SET revoked_at = now()
WHERE id = @id AND team_id IS NOT DISTINCT FROM sqlc.narg('team_id')::bigint AND revoked_at IS NULL
RETURNING *;

-- name: AdminTokenTouch :exec
-- Records a use; at most once a minute per token, so a busy script does not
-- write a row version per request.
UPDATE admin_token SET last_used_at = now()
WHERE id = @id AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute');
