-- name: TeamCreate :one
INSERT INTO team (name) VALUES (@name) RETURNING *;

-- name: TeamGetByName :one
SELECT * FROM team WHERE name = @name;

-- name: TeamGetByID :one
SELECT * FROM team WHERE id = @id;

-- name: TeamList :many
SELECT * FROM team ORDER BY id;
