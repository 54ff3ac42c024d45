-- name: MemberCreate :one
INSERT INTO member (team_id, email, role, tier_id) VALUES (@team_id, @email, @role, sqlc.narg('tier_id')) RETURNING *;

-- name: MemberGetByEmail :one
SELECT * FROM member WHERE team_id = @team_id AND email = @email;

-- name: MemberGetByID :one
SELECT * FROM member WHERE team_id = @team_id AND id = @id;

-- name: MemberLockByID :one
-- Reads a member for a change that depends on what is stored (limits): a
-- concurrent change waits here, then reads what the first one committed.
SELECT * FROM member WHERE team_id = @team_id AND id = @id FOR UPDATE;

-- name: MemberLockByEmail :one
-- As MemberLockByID, for an invite that sets a password only if none is set.
SELECT * FROM member WHERE team_id = @team_id AND email = @email FOR UPDATE;

-- name: MemberList :many
SELECT * FROM member WHERE team_id = @team_id ORDER BY id;

-- name: MemberSetStatus :one
-- A change of status moves the session epoch on: every console session the
-- member had ends, whichever way the status went.
UPDATE member SET status = @status, session_epoch = session_epoch + (status <> @status)::int
WHERE team_id = @team_id AND id = @id RETURNING *;

-- name: MemberSetRole :one
UPDATE member SET role = @role WHERE team_id = @team_id AND id = @id RETURNING *;

-- name: MemberLockActiveOwners :many
-- Locks a team's active owners, in id order: changes that could leave the team
-- without one (a cut-off, a demotion) serialise here, so two owners cutting
-- each other off at once cannot both succeed.
SELECT id FROM member WHERE team_id = @team_id AND role = 'owner' AND status = 'active' ORDER BY id FOR UPDATE;

-- name: MemberListAll :many
-- For the config snapshot (email: the access log names members by it).
SELECT id, team_id, email, status, tier_id FROM member;
