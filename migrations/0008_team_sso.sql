-- +goose Up
-- Single sign-on per team: at most one OpenID Connect issuer and one GitHub
-- OAuth app. The client secret is never stored: it is read from an environment
-- variable whose name is derived from the team's name and the kind (see
-- store.SSOSecretEnv), so one team's owner cannot point at another's secret.
CREATE TABLE team_sso (
    team_id         bigint NOT NULL REFERENCES team (id) ON DELETE CASCADE,
    kind            text NOT NULL CHECK (kind IN ('oidc', 'github')),
    -- Shown on the sign-in button: "Sign in with <display_name>".
    display_name    text NOT NULL CHECK (display_name <> ''),
    -- OIDC only: the issuer whose discovery document names the endpoints.
    issuer_url      text NOT NULL DEFAULT '',
    client_id       text NOT NULL CHECK (client_id <> ''),
    -- Who may join just-in-time: only emails already invited or in the team,
    -- any verified email of allowed_domains, or (GitHub) members of allowed_org.
    join_policy     text NOT NULL CHECK (join_policy IN ('invited', 'domains', 'org')),
    allowed_domains text[] NOT NULL DEFAULT '{}',
    allowed_org     text NOT NULL DEFAULT '',
    enabled         boolean NOT NULL DEFAULT true,
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (team_id, kind),
    CHECK (kind = 'github' OR issuer_url <> ''),
    CHECK (join_policy <> 'org' OR (kind = 'github' AND allowed_org <> '')),
    CHECK (join_policy <> 'domains' OR cardinality(allowed_domains) > 0)
);

-- Off only while an SSO method is enabled (checked by the store).
ALTER TABLE team ADD COLUMN password_sign_in boolean NOT NULL DEFAULT true;

-- How the member last signed in to the console; NULL until they first do.
ALTER TABLE member ADD COLUMN sign_in_method text CHECK (sign_in_method IN ('password', 'oidc', 'github'));

-- +goose Down
ALTER TABLE member DROP COLUMN sign_in_method;
ALTER TABLE team DROP COLUMN password_sign_in;
DROP TABLE team_sso;
