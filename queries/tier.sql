-- name: TierCreate :one
INSERT INTO tier (team_id, name, rate_algorithm, rate_limit, rate_period_ms, rate_burst, concurrency,
    tokens_per_minute, budget_micros, budget_period, weight, auto_approve_micros, over_budget)
VALUES (@team_id, @name, @rate_algorithm, @rate_limit, @rate_period_ms, @rate_burst, @concurrency,
    @tokens_per_minute, @budget_micros, @budget_period, @weight, @auto_approve_micros, @over_budget)
RETURNING *;

-- name: TierGetByName :one
SELECT * FROM tier WHERE team_id = @team_id AND name = @name;

-- name: TierGetByID :one
SELECT * FROM tier WHERE team_id = @team_id AND id = @id;

-- name: TierLockByName :one
-- A change that depends on what is stored waits here for a concurrent one.
SELECT * FROM tier WHERE team_id = @team_id AND name = @name FOR UPDATE;

-- name: TierUpdate :one
UPDATE tier SET rate_algorithm = @rate_algorithm, rate_limit = @rate_limit, rate_period_ms = @rate_period_ms,
    rate_burst = @rate_burst, concurrency = @concurrency, tokens_per_minute = @tokens_per_minute,
    budget_micros = @budget_micros, budget_period = @budget_period, weight = @weight,
    auto_approve_micros = @auto_approve_micros, over_budget = @over_budget, updated_at = now()
WHERE team_id = @team_id AND id = @id
RETURNING *;

-- name: TierDelete :execrows
DELETE FROM tier WHERE team_id = @team_id AND id = @id;

-- name: TierList :many
SELECT t.*, (SELECT count(*) FROM member m WHERE m.tier_id = t.id)::bigint AS members
FROM tier t WHERE t.team_id = @team_id ORDER BY t.name;

-- name: TierMemberCount :one
SELECT count(*)::bigint FROM member WHERE team_id = @team_id AND tier_id = @tier_id;

-- name: TierListAll :many
-- For the config snapshot.
SELECT * FROM tier;

-- name: MemberSetTier :one
UPDATE member SET tier_id = sqlc.narg(tier_id) WHERE team_id = @team_id AND id = @id RETURNING *;
