-- name: SSOUpsert :one
INSERT INTO team_sso (team_id, kind, display_name, issuer_url, client_id, join_policy, allowed_domains, allowed_org, enabled)
VALUES (@team_id, @kind, @display_name, @issuer_url, @client_id, @join_policy, @allowed_domains, @allowed_org, @enabled)
ON CONFLICT (team_id, kind) DO UPDATE SET display_name = excluded.display_name, issuer_url = excluded.issuer_url,
    client_id = excluded.client_id, join_policy = excluded.join_policy, allowed_domains = excluded.allowed_domains,
    allowed_org = excluded.allowed_org, enabled = excluded.enabled, updated_at = now()
RETURNING *;

-- name: SSOGet :one
SELECT * FROM team_sso WHERE team_id = @team_id AND kind = @kind;

-- name: SSOList :many
SELECT * FROM team_sso WHERE team_id = @team_id ORDER BY kind;

-- name: SSOListEnabled :many
-- Every team's enabled methods, for the sign-in page and check-config.
SELECT sqlc.embed(team_sso), team.name AS team_name
FROM team_sso JOIN team ON team.id = team_sso.team_id
WHERE team_sso.enabled
ORDER BY team.name, team_sso.kind;

-- name: SSOCountEnabled :one
SELECT count(*) FROM team_sso WHERE team_id = @team_id AND enabled;

-- name: TeamSetPasswordSignIn :one
UPDATE team SET password_sign_in = @password_sign_in WHERE id = @id RETURNING *;

-- name: MemberSetSignInMethod :exec
UPDATE member SET sign_in_method = @sign_in_method WHERE team_id = @team_id AND id = @id;

-- name: InviteGetPendingByEmail :one
-- The newest usable invite of email to a team, for a just-in-time join under
-- the "invited" policy.
SELECT * FROM invite
WHERE team_id = @team_id AND email = @email AND used_at IS NULL AND expires_at > now()
ORDER BY created_at DESC
LIMIT 1;

-- name: InviteUseAllForEmail :exec
-- A member who joined by SSO has no use for their pending links.
UPDATE invite SET used_at = now()
WHERE team_id = @team_id AND email = @email AND used_at IS NULL;
