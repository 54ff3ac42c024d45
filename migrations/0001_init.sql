-- +goose Up
-- The whole product's schema. Money is bigint micro-dollars, token counts bigint.
-- Tables are singular nouns; every tenant-owned row carries team_id so every query
-- can be scoped by team.

CREATE TABLE team (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name          text NOT NULL UNIQUE CHECK (name ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
    -- Team budget; NULL means no team budget.
    budget_micros bigint CHECK (budget_micros >= 0),
    budget_period text NOT NULL DEFAULT 'monthly' CHECK (budget_period IN ('total', 'daily', 'monthly')),
    created_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE member (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    team_id       bigint NOT NULL REFERENCES team (id) ON DELETE CASCADE,
    email         text NOT NULL CHECK (email = lower(email) AND email LIKE '%_@_%'),
    role          text NOT NULL DEFAULT 'member' CHECK (role IN ('owner', 'member')),
    status        text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'disabled')),
    password_hash text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (team_id, email),
    UNIQUE (team_id, id)
);
-- Sign-in is by email, so one email belongs to one team.
CREATE UNIQUE INDEX member_email_key ON member (email);

-- Per-member limits; absent row or NULL column means "no limit of that kind".
CREATE TABLE member_limit (
    member_id        bigint PRIMARY KEY REFERENCES member (id) ON DELETE CASCADE,
    team_id          bigint NOT NULL REFERENCES team (id) ON DELETE CASCADE,
    rate_algorithm   text NOT NULL DEFAULT 'token_bucket' CHECK (rate_algorithm IN ('token_bucket', 'sliding_window')),
    rate_limit       bigint CHECK (rate_limit > 0),
    rate_period_ms   bigint NOT NULL DEFAULT 1000 CHECK (rate_period_ms > 0),
    rate_burst       bigint CHECK (rate_burst > 0),
    concurrency      bigint CHECK (concurrency > 0),
    tokens_per_minute bigint CHECK (tokens_per_minute > 0),
    budget_micros    bigint CHECK (budget_micros >= 0),
    budget_period    text NOT NULL DEFAULT 'monthly' CHECK (budget_period IN ('total', 'daily', 'monthly')),
    updated_at       timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE api_key (
    -- The public key id, the middle part of tg_<id>_<secret>.
    id          text PRIMARY KEY CHECK (id ~ '^[a-z2-7]{13}$'),
    team_id     bigint NOT NULL,
    member_id   bigint NOT NULL,
    name        text NOT NULL DEFAULT '',
    -- SHA-256 of the secret part; the plaintext is never stored.
    secret_hash bytea NOT NULL CHECK (length(secret_hash) = 32),
    created_at  timestamptz NOT NULL DEFAULT now(),
    -- Set by rotation: the key keeps working until then, with a deprecation header.
    expires_at  timestamptz,
    replaced_by text REFERENCES api_key (id),
    revoked_at  timestamptz,
    FOREIGN KEY (team_id, member_id) REFERENCES member (team_id, id) ON DELETE CASCADE
);
CREATE INDEX api_key_member_idx ON api_key (team_id, member_id);

CREATE TABLE route (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    team_id           bigint NOT NULL REFERENCES team (id) ON DELETE CASCADE,
    -- Path prefix the gateway serves, e.g. /anthropic.
    prefix            text NOT NULL CHECK (prefix ~ '^(/[a-z0-9][a-z0-9._-]*)+$'),
    upstream_url      text NOT NULL,
    -- Which provider's error shape and usage format the route speaks.
    dialect           text NOT NULL CHECK (dialect IN ('anthropic', 'openai', 'generic')),
    credential_header text NOT NULL DEFAULT '',
    -- Name of the gateway environment variable holding the provider credential;
    -- the value itself is never stored.
    credential_env    text NOT NULL DEFAULT '',
    credential_format text NOT NULL DEFAULT '{}' CHECK (credential_format LIKE '%{}%'),
    -- What admission does when Redis is unreachable.
    fail_mode         text NOT NULL DEFAULT 'closed' CHECK (fail_mode IN ('closed', 'open')),
    created_at        timestamptz NOT NULL DEFAULT now(),
    UNIQUE (team_id, prefix)
);

-- Prices in micro-dollars per million tokens.
CREATE TABLE price (
    model                       text PRIMARY KEY,
    provider                    text NOT NULL,
    input_micros_per_mtok       bigint NOT NULL CHECK (input_micros_per_mtok >= 0),
    output_micros_per_mtok      bigint NOT NULL CHECK (output_micros_per_mtok >= 0),
    cache_write_micros_per_mtok bigint NOT NULL DEFAULT 0 CHECK (cache_write_micros_per_mtok >= 0),
    cache_read_micros_per_mtok  bigint NOT NULL DEFAULT 0 CHECK (cache_read_micros_per_mtok >= 0),
    max_output_tokens           bigint NOT NULL CHECK (max_output_tokens > 0),
    -- Optional higher tier once the prompt passes tier_threshold_tokens.
    tier_threshold_tokens       bigint,
    tier_input_micros_per_mtok  bigint,
    tier_output_micros_per_mtok bigint,
    taken_on                    date NOT NULL,
    updated_at                  timestamptz NOT NULL DEFAULT now()
);

-- One row per admitted request; request_id is gateway-generated.
CREATE TABLE ledger (
    team_id             bigint NOT NULL REFERENCES team (id) ON DELETE CASCADE,
    request_id          text NOT NULL,
    member_id           bigint NOT NULL,
    key_id              text NOT NULL,
    route_id            bigint,
    model               text NOT NULL DEFAULT '',
    status              text NOT NULL CHECK (status IN ('held', 'settled', 'uncertain', 'released')),
    http_status         int,
    input_tokens        bigint NOT NULL DEFAULT 0,
    output_tokens       bigint NOT NULL DEFAULT 0,
    cache_write_tokens  bigint NOT NULL DEFAULT 0,
    cache_read_tokens   bigint NOT NULL DEFAULT 0,
    reasoning_tokens    bigint NOT NULL DEFAULT 0,
    held_micros         bigint NOT NULL DEFAULT 0,
    cost_micros         bigint NOT NULL DEFAULT 0,
    created_at          timestamptz NOT NULL DEFAULT now(),
    settled_at          timestamptz,
    PRIMARY KEY (team_id, request_id)
);
CREATE INDEX ledger_member_time_idx ON ledger (team_id, member_id, created_at);

CREATE TABLE audit_log (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    team_id    bigint REFERENCES team (id) ON DELETE SET NULL,
    actor      text NOT NULL,
    action     text NOT NULL,
    target     text NOT NULL DEFAULT '',
    before     jsonb,
    after      jsonb,
    at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX audit_log_team_idx ON audit_log (team_id, at);

-- Console sessions, in the layout alexedwards/scs pgxstore expects.
CREATE TABLE sessions (
    token  text PRIMARY KEY,
    data   bytea NOT NULL,
    expiry timestamptz NOT NULL
);
CREATE INDEX sessions_expiry_idx ON sessions (expiry);

-- One-time links: first-run setup (team_id NULL) and member invites.
CREATE TABLE invite (
    token_hash bytea PRIMARY KEY CHECK (length(token_hash) = 32),
    team_id    bigint REFERENCES team (id) ON DELETE CASCADE,
    email      text NOT NULL DEFAULT '',
    role       text NOT NULL DEFAULT 'member' CHECK (role IN ('owner', 'member')),
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    used_at    timestamptz
);

-- Every replica keeps an in-memory snapshot of teams, members, keys and routes;
-- a change to any of them tells the replicas to reload. The payload is the schema
-- so replicas sharing a database but not a schema ignore each other.
-- +goose StatementBegin
CREATE FUNCTION notify_config_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('tollgate_config', current_schema());
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER team_config_change AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON team
    FOR EACH STATEMENT EXECUTE FUNCTION notify_config_change();
CREATE TRIGGER member_config_change AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON member
    FOR EACH STATEMENT EXECUTE FUNCTION notify_config_change();
CREATE TRIGGER member_limit_config_change AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON member_limit
    FOR EACH STATEMENT EXECUTE FUNCTION notify_config_change();
CREATE TRIGGER api_key_config_change AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON api_key
    FOR EACH STATEMENT EXECUTE FUNCTION notify_config_change();
CREATE TRIGGER route_config_change AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON route
    FOR EACH STATEMENT EXECUTE FUNCTION notify_config_change();
CREATE TRIGGER price_config_change AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON price
    FOR EACH STATEMENT EXECUTE FUNCTION notify_config_change();

-- +goose Down
DROP TABLE invite, sessions, audit_log, ledger, price, route, api_key, member_limit, member, team;
DROP FUNCTION notify_config_change();
