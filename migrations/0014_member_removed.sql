-- +goose Up
-- A member removed from the team: their row stays (ledger rows, budget
-- requests and the audit log name them), but nothing of theirs works again.
ALTER TABLE member DROP CONSTRAINT member_status_check,
    ADD CONSTRAINT member_status_check CHECK (status IN ('active', 'disabled', 'removed'));

-- +goose Down
UPDATE member SET status = 'disabled' WHERE status = 'removed';
ALTER TABLE member DROP CONSTRAINT member_status_check,
    ADD CONSTRAINT member_status_check CHECK (status IN ('active', 'disabled'));
