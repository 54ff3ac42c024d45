-- +goose Up
-- Alerts: webhooks per team, and the outbox they are delivered from. An event
-- that is a database write (a budget request, a cut-off) is queued in the same
-- transaction as the write, so it is sent if and only if the write commits.
CREATE TABLE webhook (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    team_id    bigint NOT NULL REFERENCES team (id) ON DELETE CASCADE,
    name       text NOT NULL CHECK (name <> '' AND char_length(name) <= 100),
    url        text NOT NULL CHECK (char_length(url) <= 2000),
    -- slack: {"text": ...}; signed: JSON signed as Standard Webhooks say.
    format     text NOT NULL CHECK (format IN ('slack', 'signed')),
    -- The HMAC key of a signed webhook, whsec_<base64>; shown once, at creation.
    secret     text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (team_id, name)
);

-- One row per event per webhook. A worker on any replica claims due rows with
-- FOR UPDATE SKIP LOCKED and leases them (next_attempt_at moves past the
-- delivery's timeout), so one replica sends each row while it is leased.
CREATE TABLE webhook_delivery (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    webhook_id      bigint NOT NULL REFERENCES webhook (id) ON DELETE CASCADE,
    team_id         bigint NOT NULL,
    -- The Standard Webhooks message id: the same on every retry, so a receiver
    -- can drop a duplicate.
    event_id        text NOT NULL,
    event_type      text NOT NULL,
    payload         jsonb NOT NULL,
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    delivered_at    timestamptz,
    -- Set when the attempts ran out; the row is kept for the console.
    failed_at       timestamptz,
    last_error      text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (webhook_id, event_id)
);
CREATE INDEX webhook_delivery_due_idx ON webhook_delivery (next_attempt_at)
    WHERE delivered_at IS NULL AND failed_at IS NULL;
CREATE INDEX webhook_delivery_webhook_idx ON webhook_delivery (webhook_id, created_at);

-- An alert that must fire once per occurrence across replicas (a budget's 80%
-- in one period): the replica whose insert lands sends it.
CREATE TABLE alert_mark (
    team_id    bigint NOT NULL REFERENCES team (id) ON DELETE CASCADE,
    mark       text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (team_id, mark)
);

-- +goose Down
DROP TABLE alert_mark;
DROP TABLE webhook_delivery;
DROP TABLE webhook;
