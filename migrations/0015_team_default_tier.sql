-- +goose Up
-- The tier a team's new members land in (NULL: none, so they start without
-- limits of the tier's). New teams are made with one; existing teams are left
-- as they are, with none, until their owner chooses.
ALTER TABLE team ADD COLUMN default_tier_id bigint,
    ADD FOREIGN KEY (id, default_tier_id) REFERENCES tier (team_id, id) ON DELETE SET NULL (default_tier_id);

-- The tier an invitee lands in, chosen when the invite is made (NULL: none).
-- A tier deleted meanwhile leaves its invitees in none.
ALTER TABLE invite ADD COLUMN tier_id bigint,
    ADD FOREIGN KEY (team_id, tier_id) REFERENCES tier (team_id, id) ON DELETE SET NULL (tier_id);

-- +goose Down
ALTER TABLE invite DROP COLUMN tier_id;
ALTER TABLE team DROP COLUMN default_tier_id;
