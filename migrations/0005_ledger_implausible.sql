-- +goose Up
-- A request whose provider reported usage it cannot have had (negative, past its
-- max_tokens, far past its body, absurd) is charged its hold and marked
-- 'implausible', so an operator can find it; it counts as spend like 'uncertain'.
ALTER TABLE ledger DROP CONSTRAINT ledger_status_check,
    ADD CONSTRAINT ledger_status_check CHECK (status IN ('held', 'settled', 'uncertain', 'implausible', 'released'));

-- +goose Down
UPDATE ledger SET status = 'uncertain' WHERE status = 'implausible';
ALTER TABLE ledger DROP CONSTRAINT ledger_status_check,
    ADD CONSTRAINT ledger_status_check CHECK (status IN ('held', 'settled', 'uncertain', 'released'));
