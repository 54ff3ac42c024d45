-- name: MemberLimitGet :one
SELECT * FROM member_limit WHERE team_id = @team_id AND member_id = @member_id;

-- name: MemberLimitUpsert :one
INSERT INTO member_limit (member_id, team_id, rate_algorithm, rate_limit, rate_period_ms, rate_burst, concurrency,
    tokens_per_minute, budget_micros, budget_period)
VALUES (@member_id, @team_id, @rate_algorithm, @rate_limit, @rate_period_ms, @rate_burst, @concurrency,
    @tokens_per_minute, @budget_micros, @budget_period)
ON CONFLICT (member_id) DO UPDATE SET
    rate_algorithm = excluded.rate_algorithm, rate_limit = excluded.rate_limit,
    rate_period_ms = excluded.rate_period_ms, rate_burst = excluded.rate_burst,
    concurrency = excluded.concurrency, tokens_per_minute = excluded.tokens_per_minute,
    budget_micros = excluded.budget_micros, budget_period = excluded.budget_period, updated_at = now()
RETURNING *;

-- name: MemberLimitListAll :many
-- For the config snapshot.
SELECT * FROM member_limit;
