-- name: APIKeyCreate :one
INSERT INTO api_key (id, team_id, member_id, name, secret_hash)
VALUES (@id, @team_id, @member_id, @name, @secret_hash)
RETURNING *;

-- name: APIKeyGetByID :one
SELECT * FROM api_key WHERE team_id = @team_id AND id = @id;

-- name: APIKeyLock :one
-- Reads a key for a change that depends on its state (rotate, revoke): a
-- concurrent change of the same key waits here, then reads what the first one
-- committed, so only one of them can win.
SELECT * FROM api_key WHERE team_id = @team_id AND id = @id FOR UPDATE;

-- name: APIKeyListByTeam :many
SELECT * FROM api_key WHERE team_id = @team_id ORDER BY created_at, id;

-- name: APIKeyExpire :one
-- Starts a rotated key's grace window; a key already expiring keeps the earlier end.
UPDATE api_key
SET expires_at = least(coalesce(expires_at, @expires_at::timestamptz), @expires_at::timestamptz),
    replaced_by = @replaced_by
WHERE team_id = @team_id AND id = @id AND revoked_at IS NULL
RETURNING *;

-- name: APIKeyRevoke :one
UPDATE api_key SET revoked_at = coalesce(sqlc.narg('now')::timestamptz, now())
WHERE team_id = @team_id AND id = @id AND revoked_at IS NULL
RETURNING *;

-- name: APIKeyListLive :many
-- For the config snapshot: every key that can still authenticate, plus keys revoked
-- recently so their owners get a clear "revoked" message instead of "invalid".
SELECT id, team_id, member_id, secret_hash, expires_at, revoked_at
FROM api_key
WHERE revoked_at IS NULL OR revoked_at > now() - interval '30 days';

-- name: APIKeyFind :one
-- Operator lookup by the globally unique key id (CLI only; the console always scopes by team).
SELECT * FROM api_key WHERE id = @id;

-- name: KeyUseRecord :exec
-- The newest use of each key in a ledger batch; an older batch arriving late
-- never moves a time back. Ids that name no key are skipped.
INSERT INTO api_key_use (key_id, team_id, last_used_at)
SELECT k.id, k.team_id, u.at
FROM (SELECT unnest(@key_ids::text[]) AS key_id, unnest(@used_at::timestamptz[]) AS at) u
JOIN api_key k ON k.id = u.key_id
ON CONFLICT (key_id) DO UPDATE SET last_used_at = greatest(api_key_use.last_used_at, excluded.last_used_at);

-- name: KeyUseList :many
SELECT key_id, last_used_at FROM api_key_use WHERE team_id = @team_id;

-- name: APIKeyRevokeByMember :many
-- Revokes every key of a member who leaves the team.
UPDATE api_key SET revoked_at = now()
WHERE team_id = @team_id AND member_id = @member_id AND revoked_at IS NULL
RETURNING id;
