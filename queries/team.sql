-- name: TeamCreate :one
INSERT INTO team (name) VALUES (@name) RETURNING *;

-- name: TeamGetByName :one
SELECT * FROM team WHERE name = @name;

-- name: TeamGetByID :one
SELECT * FROM team WHERE id = @id;

-- name: TeamLock :one
-- Reads a team for a change of its limits: a concurrent change waits here, then
-- reads what the first one committed.
SELECT * FROM team WHERE id = @id FOR UPDATE;

-- name: TeamList :many
SELECT * FROM team ORDER BY id;

-- name: TeamSetLimits :one
UPDATE team SET rate_algorithm = @rate_algorithm, rate_limit = @rate_limit,
    rate_period_ms = @rate_period_ms, rate_burst = @rate_burst, concurrency = @concurrency,
    tokens_per_minute = @tokens_per_minute, budget_micros = @budget_micros, budget_period = @budget_period
WHERE id = @id
RETURNING *;

-- name: TeamSetDefaultTier :one
UPDATE team SET default_tier_id = sqlc.narg(default_tier_id) WHERE id = @id RETURNING *;

-- name: TeamSetOverBudget :one
UPDATE team SET over_budget = @over_budget WHERE id = @id RETURNING *;
