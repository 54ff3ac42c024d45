-- +goose Up
-- A late charge (rows that reached the ledger after a rebuild had read it) that
-- Redis did not take: the rebuild generation the rows landed in. Any replica
-- then makes sure the team's counters are rebuilt after it, so the charge is
-- not lost with the replica that owed it.
ALTER TABLE team_counters ADD COLUMN late_gen bigint NOT NULL DEFAULT 0;
CREATE INDEX team_counters_late ON team_counters (team_id) WHERE late_gen > 0;

-- +goose Down
DROP INDEX team_counters_late;
ALTER TABLE team_counters DROP COLUMN late_gen;
