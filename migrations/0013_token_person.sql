-- +goose Up
-- Offboarding binds at the next request. Each admin token now belongs to a
-- person (member_id: the owner who made it, directly or through a token of
-- theirs) or to the deployment (made by the operator's CLI), and the token
-- works only while that person is an active owner of its team. A member
-- removed from the team takes their tokens with them.
ALTER TABLE admin_token ADD COLUMN member_id bigint,
    ADD COLUMN owner_kind text NOT NULL DEFAULT 'deployment'
        CHECK (owner_kind IN ('deployment', 'member', 'unattributed')),
    ADD FOREIGN KEY (team_id, member_id) REFERENCES member (team_id, id) ON DELETE CASCADE,
    ADD CHECK ((owner_kind = 'member') = (member_id IS NOT NULL));
CREATE INDEX admin_token_member_idx ON admin_token (team_id, member_id) WHERE member_id IS NOT NULL;

-- Existing tokens take their owner from created_by: 'cli' is the deployment,
-- 'member:N' is member N of the token's team, 'token:<id>:<name>' is whoever
-- owns that token. Anything else ('' or a member no longer in the team) cannot
-- be tied to anyone: such a token is revoked, not handed to the deployment,
-- so a token of someone already offboarded does not live on unowned.
WITH RECURSIVE owner_of (id, owner_kind, member_id) AS (
    SELECT t.id,
           CASE WHEN t.created_by = 'cli' THEN 'deployment'
                WHEN m.id IS NOT NULL THEN 'member'
                ELSE 'unattributed' END,
           m.id
    FROM admin_token t
    LEFT JOIN member m ON t.created_by LIKE 'member:%' AND m.team_id = t.team_id
        AND m.id::text = substring(t.created_by FROM 8)
    WHERE t.created_by NOT LIKE 'token:%'
    UNION ALL
    SELECT t.id, o.owner_kind, o.member_id
    FROM admin_token t
    JOIN admin_token parent ON t.created_by LIKE 'token:%' AND split_part(t.created_by, ':', 2) = parent.id
        AND parent.team_id IS NOT DISTINCT FROM t.team_id
    JOIN owner_of o ON o.id = parent.id
)
UPDATE admin_token t SET owner_kind = coalesce(o.owner_kind, 'unattributed'), member_id = o.member_id
FROM admin_token s LEFT JOIN owner_of o ON o.id = s.id
WHERE s.id = t.id;
UPDATE admin_token SET revoked_at = now() WHERE owner_kind = 'unattributed' AND revoked_at IS NULL;

-- A console session carries the session_epoch of its member at sign-in; a
-- cut-off or restore moves the epoch on, so every older session is refused
-- (and deleted) at its next request on any replica, and a restore never
-- revives one. Sessions of members cut off already end now.
ALTER TABLE member ADD COLUMN session_epoch bigint NOT NULL DEFAULT 0;
UPDATE member SET session_epoch = 1 WHERE status = 'disabled';

-- +goose Down
ALTER TABLE member DROP COLUMN session_epoch;
ALTER TABLE admin_token DROP COLUMN owner_kind, DROP COLUMN member_id;
