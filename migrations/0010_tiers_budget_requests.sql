-- +goose Up
-- Limit tiers: named presets of a team's member limits. A member in a tier has
-- the tier's limits, with each limit the member has set of their own (a
-- non-NULL member_limit column) taking precedence over the tier's.
CREATE TABLE tier (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    team_id           bigint NOT NULL REFERENCES team (id) ON DELETE CASCADE,
    name              text NOT NULL CHECK (name ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
    rate_algorithm    text NOT NULL DEFAULT 'token_bucket' CHECK (rate_algorithm IN ('token_bucket', 'sliding_window')),
    rate_limit        bigint CHECK (rate_limit > 0),
    rate_period_ms    bigint NOT NULL DEFAULT 1000 CHECK (rate_period_ms > 0),
    rate_burst        bigint CHECK (rate_burst > 0),
    concurrency       bigint CHECK (concurrency > 0),
    tokens_per_minute bigint CHECK (tokens_per_minute > 0),
    budget_micros     bigint CHECK (budget_micros >= 0),
    budget_period     text NOT NULL DEFAULT 'monthly' CHECK (budget_period IN ('total', 'daily', 'monthly')),
    -- The member's share under contention, for the fair waiting room (not yet used).
    weight            bigint NOT NULL DEFAULT 1 CHECK (weight BETWEEN 1 AND 1000),
    -- Budget requests are approved at once while a member's auto-approved grants
    -- in the current period, this one included, stay at or below this; 0: never.
    auto_approve_micros bigint NOT NULL DEFAULT 0 CHECK (auto_approve_micros >= 0),
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    UNIQUE (team_id, name),
    UNIQUE (team_id, id)
);

-- A tier of the member's own team only; a tier with members cannot be deleted.
ALTER TABLE member ADD COLUMN tier_id bigint,
    ADD FOREIGN KEY (team_id, tier_id) REFERENCES tier (team_id, id);
CREATE INDEX member_tier_idx ON member (tier_id) WHERE tier_id IS NOT NULL;

-- A member asks for more budget; an owner (or the tier's ceiling) approves or
-- declines. An approved request is a grant: it adds amount_micros to the
-- member's budget for the one period it was approved in (budget_period and
-- period_start), never the next.
CREATE TABLE budget_request (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    team_id       bigint NOT NULL,
    member_id     bigint NOT NULL,
    amount_micros bigint NOT NULL CHECK (amount_micros > 0),
    reason        text NOT NULL CHECK (reason <> '' AND char_length(reason) <= 500),
    status        text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'approved', 'declined')),
    auto_approved boolean NOT NULL DEFAULT false,
    budget_period text CHECK (budget_period IN ('total', 'daily', 'monthly')),
    period_start  timestamptz,
    decided_by    text,
    decided_at    timestamptz,
    note          text NOT NULL DEFAULT '' CHECK (char_length(note) <= 500),
    created_at    timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (team_id, member_id) REFERENCES member (team_id, id) ON DELETE CASCADE,
    CHECK ((status = 'approved') = (period_start IS NOT NULL AND budget_period IS NOT NULL)),
    CHECK ((status = 'pending') = (decided_at IS NULL))
);
CREATE INDEX budget_request_pending_idx ON budget_request (team_id, created_at) WHERE status = 'pending';
CREATE INDEX budget_request_member_idx ON budget_request (member_id, created_at);
CREATE INDEX budget_request_grant_idx ON budget_request (period_start) WHERE status = 'approved';

CREATE TRIGGER tier_config_change AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON tier
    FOR EACH STATEMENT EXECUTE FUNCTION notify_config_change();
-- Only a grant changes what the replicas enforce; a pending request does not.
CREATE TRIGGER budget_request_config_change AFTER INSERT OR UPDATE ON budget_request
    FOR EACH ROW WHEN (NEW.status = 'approved') EXECUTE FUNCTION notify_config_change();

-- +goose Down
DROP TABLE budget_request;
ALTER TABLE member DROP COLUMN tier_id;
DROP TABLE tier;
