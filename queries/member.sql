-- name: MemberCreate :one
INSERT INTO member (team_id, email, role) VALUES (@team_id, @email, @role) RETURNING *;

-- name: MemberGetByEmail :one
SELECT * FROM member WHERE team_id = @team_id AND email = @email;

-- name: MemberGetByID :one
SELECT * FROM member WHERE team_id = @team_id AND id = @id;

-- name: MemberList :many
SELECT * FROM member WHERE team_id = @team_id ORDER BY id;

-- name: MemberSetStatus :one
UPDATE member SET status = @status WHERE team_id = @team_id AND id = @id RETURNING *;

-- name: MemberListAll :many
-- For the config snapshot.
SELECT id, team_id, status FROM member;
