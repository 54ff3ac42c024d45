-- +goose Up
-- Team-wide limits, on top of each member's own; NULL means no limit of that kind.
ALTER TABLE team
    ADD COLUMN rate_algorithm    text NOT NULL DEFAULT 'token_bucket' CHECK (rate_algorithm IN ('token_bucket', 'sliding_window')),
    ADD COLUMN rate_limit        bigint CHECK (rate_limit > 0),
    ADD COLUMN rate_period_ms    bigint NOT NULL DEFAULT 1000 CHECK (rate_period_ms > 0),
    ADD COLUMN rate_burst        bigint CHECK (rate_burst > 0),
    ADD COLUMN concurrency       bigint CHECK (concurrency > 0),
    ADD COLUMN tokens_per_minute bigint CHECK (tokens_per_minute > 0);

-- +goose Down
ALTER TABLE team
    DROP COLUMN rate_algorithm, DROP COLUMN rate_limit, DROP COLUMN rate_period_ms,
    DROP COLUMN rate_burst, DROP COLUMN concurrency, DROP COLUMN tokens_per_minute;
