-- name: TeamCreate :one
INSERT INTO team (name) VALUES (@name) RETURNING *;

-- name: TeamGetByName :one
SELECT * FROM team WHERE name = @name;

-- name: TeamGetByID :one
SELECT * FROM team WHERE id = @id;

-- name: TeamList :many
SELECT * FROM team ORDER BY id;

-- name: TeamSetLimits :one
UPDATE team SET rate_algorithm = @rate_algorithm, rate_limit = @rate_limit,
    rate_period_ms = @rate_period_ms, rate_burst = @rate_burst, concurrency = @concurrency
WHERE id = @id
RETURNING *;
