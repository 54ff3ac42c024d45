-- name: MemberCreate :one
INSERT INTO member (team_id, email, role) VALUES (@team_id, @email, @role) RETURNING *;

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
UPDATE member SET status = @status WHERE team_id = @team_id AND id = @id RETURNING *;

-- name: MemberListAll :many
-- For the config snapshot.
SELECT id, team_id, status, tier_id FROM member;
