-- name: MemberGetForSignIn :one
-- Sign-in names no team: one email belongs to one team (member_email_key).
SELECT * FROM member WHERE email = @email;

-- name: MemberSetPassword :exec
UPDATE member SET password_hash = @password_hash WHERE team_id = @team_id AND id = @id;

-- name: MemberAnyCanSignIn :one
SELECT EXISTS (SELECT 1 FROM member WHERE password_hash IS NOT NULL);

-- name: SessionDeleteExpired :exec
-- scs's pgxstore ignores expired rows; this removes them (run at each sign-in,
-- so no background goroutine needs stopping).
DELETE FROM sessions WHERE expiry < now();

-- name: SetupLock :exec
-- Serialises first-run setups in this schema across replicas: held to the end
-- of the transaction, so the second setup sees the owner the first committed.
SELECT pg_advisory_xact_lock(hashtext('tollgate-setup:' || current_schema()));

-- name: MemberAnyOwner :one
-- Whether the deployment is past its first run: setup links work only before.
SELECT EXISTS (SELECT 1 FROM member WHERE role = 'owner');
