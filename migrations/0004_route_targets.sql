-- +goose Up
-- A route may spread over several upstream targets: two provider accounts, two
-- regions, a primary and a fallback. The route's own upstream_url and
-- credential_env stay its first target; each row here adds one more.
ALTER TABLE route
    ADD CONSTRAINT route_team_id_key UNIQUE (team_id, id),
    -- Attempts per request, the first included; only idempotent methods retry.
    ADD COLUMN max_attempts int NOT NULL DEFAULT 2 CHECK (max_attempts BETWEEN 1 AND 5),
    -- Path probed with GET on every target to eject dead ones early; '' probes nothing.
    ADD COLUMN health_path text NOT NULL DEFAULT '' CHECK (health_path = '' OR health_path ~ '^/[A-Za-z0-9._~/-]*$');

CREATE TABLE route_target (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    team_id        bigint NOT NULL,
    route_id       bigint NOT NULL,
    upstream_url   text NOT NULL,
    -- Its own provider credential variable; '' uses the route's.
    credential_env text NOT NULL DEFAULT '',
    created_at     timestamptz NOT NULL DEFAULT now(),
    UNIQUE (route_id, upstream_url, credential_env),
    FOREIGN KEY (team_id, route_id) REFERENCES route (team_id, id) ON DELETE CASCADE
);

CREATE TRIGGER route_target_config_change AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON route_target
    FOR EACH STATEMENT EXECUTE FUNCTION notify_config_change();

-- +goose Down
DROP TABLE route_target;
ALTER TABLE route DROP CONSTRAINT route_team_id_key, DROP COLUMN max_attempts, DROP COLUMN health_path;
