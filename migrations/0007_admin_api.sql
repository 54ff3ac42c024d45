-- +goose Up
-- Admin tokens (tga_<id>_<secret>) let scripts and CI drive the JSON API. Like
-- member keys, only a SHA-256 of the 256-bit secret is stored. A token belongs
-- to one team with a role (owner: every change; read: reads only), or, with
-- team_id NULL, to the deployment: the global price list is its only business.
CREATE TABLE admin_token (
    id           text PRIMARY KEY,
    team_id      bigint REFERENCES team (id) ON DELETE CASCADE,
    name         text NOT NULL,
    role         text NOT NULL CHECK (role IN ('owner', 'read')),
    secret_hash  bytea NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    revoked_at   timestamptz,
    last_used_at timestamptz
);
CREATE INDEX admin_token_team_idx ON admin_token (team_id, created_at);

-- The first response to a creating POST sent with an Idempotency-Key, replayed
-- for 24 hours to a retry of the same request. scope is the token's team
-- ("team:<id>") or "deployment"; request_hash covers method, path and body, so
-- the same key on a different request is refused rather than replayed. A row
-- without a status is a request still being served.
CREATE TABLE api_idempotency (
    scope        text NOT NULL,
    key          text NOT NULL,
    request_hash bytea NOT NULL,
    status       int,
    content_type text NOT NULL DEFAULT '',
    body         bytea,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, key)
);
CREATE INDEX api_idempotency_age_idx ON api_idempotency (created_at);

-- +goose Down
DROP TABLE api_idempotency;
DROP TABLE admin_token;
