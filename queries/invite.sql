-- name: InviteCreate :one
-- A one-time link: team_id NULL is a first-run setup link that creates a team.
INSERT INTO invite (token_hash, team_id, email, role, expires_at, tier_id)
VALUES (@token_hash, sqlc.narg('team_id'), @email, @role, @expires_at, sqlc.narg('tier_id'))
RETURNING *;

-- name: InviteGetPending :one
-- A link that can still be used; used, expired and unknown links all miss.
SELECT * FROM invite WHERE token_hash = @token_hash AND used_at IS NULL AND expires_at > now();

-- name: InviteUse :one
-- Claims a link exactly once: of two concurrent uses, one updates the row and
-- the other finds nothing.
UPDATE invite SET used_at = now()
WHERE token_hash = @token_hash AND used_at IS NULL AND expires_at > now()
RETURNING *;

-- name: InviteListPending :many
SELECT * FROM invite
WHERE team_id = @team_id AND used_at IS NULL AND expires_at > now()
ORDER BY created_at DESC;

-- name: InviteRevokePending :many
-- Takes back every unused invite of email to the team: its links stop working.
DELETE FROM invite
WHERE team_id = @team_id AND email = @email AND used_at IS NULL AND expires_at > now()
RETURNING *;

-- name: InviteUseAllSetup :exec
-- Once the deployment has its owner, every other setup link is spent.
UPDATE invite SET used_at = now() WHERE team_id IS NULL AND used_at IS NULL;

-- name: InviteGetSetup :one
-- A setup link in any state, to tell its holder that setup is done.
SELECT * FROM invite WHERE token_hash = @token_hash AND team_id IS NULL;
