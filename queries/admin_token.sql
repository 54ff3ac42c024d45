-- name: AdminTokenCreate :one
INSERT INTO admin_token (id, team_id, name, role, secret_hash, expires_at, created_by, owner_kind, member_id)
VALUES (@id, @team_id, @name, @role, @secret_hash, @expires_at, @created_by, @owner_kind, sqlc.narg('member_id'))
RETURNING *;

-- name: AdminTokenGet :one
SELECT * FROM admin_token WHERE id = @id;

-- name: AdminTokenGetWithOwner :one
-- A token with the standing of the person it belongs to (NULL for the
-- deployment's): what authentication decides on, read fresh per request.
SELECT sqlc.embed(admin_token), m.email AS owner_email, m.role AS owner_role, m.status AS owner_status
FROM admin_token LEFT JOIN member m ON m.team_id = admin_token.team_id AND m.id = admin_token.member_id
WHERE admin_token.id = @id;

-- name: AdminTokenList :many
-- A team's tokens, or (team_id NULL) the deployment's, with their owners' emails.
SELECT sqlc.embed(admin_token), m.email AS owner_email
FROM admin_token LEFT JOIN member m ON m.team_id = admin_token.team_id AND m.id = admin_token.member_id
WHERE admin_token.team_id IS NOT DISTINCT FROM sqlc.narg('team_id')::bigint
ORDER BY admin_token.created_at, admin_token.id;

-- name: AdminTokenRevoke :one
UPDATE admin_token SET revoked_at = now()
WHERE id = @id AND team_id IS NOT DISTINCT FROM sqlc.narg('team_id')::bigint AND revoked_at IS NULL
RETURNING *;

-- name: AdminTokenTouch :exec
-- Records a use; at most once a minute per token, so a busy script does not
-- write a row version per request.
UPDATE admin_token SET last_used_at = now()
WHERE id = @id AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute');
