-- name: RouteCreate :one
INSERT INTO route (team_id, prefix, upstream_url, dialect, credential_header, credential_env, credential_format, fail_mode)
VALUES (@team_id, @prefix, @upstream_url, @dialect, @credential_header, @credential_env, @credential_format, @fail_mode)
RETURNING *;

-- name: RouteList :many
SELECT * FROM route WHERE team_id = @team_id ORDER BY prefix;

-- name: RouteDelete :one
DELETE FROM route WHERE team_id = @team_id AND id = @id RETURNING *;

-- name: RouteListAll :many
-- For the config snapshot.
SELECT * FROM route;

-- name: RouteGetByID :one
SELECT * FROM route WHERE team_id = @team_id AND id = @id;

-- name: RouteUpdate :one
UPDATE route SET prefix = @prefix, upstream_url = @upstream_url, dialect = @dialect,
    credential_header = @credential_header, credential_env = @credential_env,
    credential_format = @credential_format, fail_mode = @fail_mode
WHERE team_id = @team_id AND id = @id
RETURNING *;
