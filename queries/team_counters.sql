-- name: TeamCountersEnsure :exec
-- Every team of a ledger batch has a row to lock before its rows are written.
INSERT INTO team_counters (team_id) SELECT unnest(@team_ids::bigint[])
ON CONFLICT (team_id) DO NOTHING;

-- name: TeamCountersShare :many
-- A ledger write's read of its teams' rebuild generations: a rebuild under way
-- (TeamCountersBumpRebuild) makes it wait, and it then sees the new generation.
SELECT team_id, rebuild_gen FROM team_counters
WHERE team_id = ANY(@team_ids::bigint[])
ORDER BY team_id
FOR SHARE;

-- name: TeamCountersBumpRebuild :one
-- A rebuild's first statement: it waits for ledger writes under way, so the
-- ledger reads after it see their rows.
INSERT INTO team_counters (team_id, rebuild_gen) VALUES (@team_id, 1)
ON CONFLICT (team_id) DO UPDATE SET rebuild_gen = team_counters.rebuild_gen + 1
RETURNING rebuild_gen;

-- name: TeamCountersRaiseWatermark :exec
-- Raises the team's watermark to (epoch, seq) if that is newer.
UPDATE team_counters SET wm_epoch = @wm_epoch, wm_seq = @wm_seq
WHERE team_id = @team_id AND (wm_epoch, wm_seq) < (@wm_epoch::bigint, @wm_seq::bigint);

-- name: TeamCountersWatermarks :many
-- Every team's watermark, which a replica starts from.
SELECT team_id, wm_epoch, wm_seq FROM team_counters WHERE wm_epoch > 0;

-- name: TeamCountersWatermarksOf :many
SELECT team_id, wm_epoch, wm_seq FROM team_counters WHERE team_id = ANY(@team_ids::bigint[]);

-- name: TeamCountersMarkLate :exec
-- A late charge Redis did not take: the team's counters must come from a
-- rebuild after generation late_gen.
UPDATE team_counters SET late_gen = GREATEST(late_gen, @late_gen::bigint) WHERE team_id = @team_id;

-- name: TeamCountersLateMarks :many
SELECT team_id, late_gen FROM team_counters WHERE late_gen > 0 ORDER BY team_id;

-- name: TeamCountersClearLate :exec
-- Clears the mark if no later one came meanwhile.
UPDATE team_counters SET late_gen = 0 WHERE team_id = @team_id AND late_gen = @late_gen;
