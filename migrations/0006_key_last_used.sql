-- +goose Up
-- When each key was last used: written with the ledger's batches (one statement
-- per flush, not one per request). A table of its own, not a column of api_key,
-- so that these writes do not fire api_key's config-change trigger and make
-- every replica reload its snapshot after each flush.
CREATE TABLE api_key_use (
    key_id       text PRIMARY KEY REFERENCES api_key (id) ON DELETE CASCADE,
    team_id      bigint NOT NULL,
    last_used_at timestamptz NOT NULL
);
CREATE INDEX api_key_use_team_idx ON api_key_use (team_id);

-- +goose Down
DROP TABLE api_key_use;
