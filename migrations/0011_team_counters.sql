-- +goose Up
-- What Postgres knows of a team's admission counters in Redis, so that losing or
-- restoring Redis cannot make it believe less spend than the ledger holds.
-- rebuild_gen orders rebuilds against ledger writes: a rebuild takes the row for
-- update before it reads the ledger, a ledger write reads it (for share) before
-- it writes rows, so a write that lands after a rebuild's read sees the new
-- generation and charges to Redis what the rebuild could not see.
-- (wm_epoch, wm_seq) is the newest generation of the counters any ledger row
-- was admitted in (the epoch and the team's admission count), so a replica that
-- starts after Redis was restored from an older snapshot can still tell.
CREATE TABLE team_counters (
    team_id     bigint PRIMARY KEY REFERENCES team (id) ON DELETE CASCADE,
    rebuild_gen bigint NOT NULL DEFAULT 0,
    wm_epoch    bigint NOT NULL DEFAULT 0,
    wm_seq      bigint NOT NULL DEFAULT 0
);

-- +goose Down
DROP TABLE team_counters;
