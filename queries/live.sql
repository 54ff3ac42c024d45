-- name: MemberLimitListByTeam :many
-- Every member's limits in one team, for the console's dashboard.
SELECT * FROM member_limit WHERE team_id = @team_id;
