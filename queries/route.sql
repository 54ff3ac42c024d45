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

-- name: RouteTargetAdd :one
INSERT INTO route_target (team_id, route_id, upstream_url, credential_env)
VALUES (@team_id, @route_id, @upstream_url, @credential_env)
RETURNING *;

-- name: RouteTargetRemove :one
DELETE FROM route_target
WHERE team_id = @team_id AND route_id = @route_id AND upstream_url = @upstream_url AND credential_env = @credential_env
RETURNING *;

-- name: RouteTargetList :many
SELECT * FROM route_target WHERE team_id = @team_id ORDER BY route_id, id;

-- name: RouteTargetListAll :many
-- For the config snapshot.
SELECT * FROM route_target ORDER BY route_id, id;

-- name: RouteSetResilience :one
UPDATE route SET max_attempts = @max_attempts, health_path = @health_path
WHERE team_id = @team_id AND id = @id
RETURNING *;
