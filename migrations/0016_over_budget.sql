-- +goose Up
-- What happens when a request's worst case does not fit the budget left: 'refuse'
-- (402, as before) or 'fit' (its output cap is lowered to what is left). Per tier,
-- and per team for the members in no tier. Existing rows keep refusing.
ALTER TABLE tier ADD COLUMN over_budget text NOT NULL DEFAULT 'refuse' CHECK (over_budget IN ('refuse', 'fit'));
ALTER TABLE team ADD COLUMN over_budget text NOT NULL DEFAULT 'refuse' CHECK (over_budget IN ('refuse', 'fit'));

-- +goose Down
ALTER TABLE tier DROP COLUMN over_budget;
ALTER TABLE team DROP COLUMN over_budget;
