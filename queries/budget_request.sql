-- name: BudgetRequestCreate :one
INSERT INTO budget_request (team_id, member_id, amount_micros, reason) VALUES (@team_id, @member_id, @amount_micros, @reason)
RETURNING *;

-- name: BudgetRequestLock :one
SELECT * FROM budget_request WHERE team_id = @team_id AND id = @id FOR UPDATE;

-- name: BudgetRequestGet :one
SELECT * FROM budget_request WHERE team_id = @team_id AND id = @id;

-- name: BudgetRequestApprove :one
-- Only a pending request: of two owners approving at once, one wins.
UPDATE budget_request SET status = 'approved', auto_approved = @auto_approved, budget_period = @budget_period,
    period_start = @period_start, decided_by = @decided_by, decided_at = now(), note = @note
WHERE team_id = @team_id AND id = @id AND status = 'pending'
RETURNING *;

-- name: BudgetRequestDecline :one
UPDATE budget_request SET status = 'declined', decided_by = @decided_by, decided_at = now(), note = @note
WHERE team_id = @team_id AND id = @id AND status = 'pending'
RETURNING *;

-- name: BudgetRequestListPending :many
SELECT r.*, m.email FROM budget_request r JOIN member m ON m.id = r.member_id
WHERE r.team_id = @team_id AND r.status = 'pending' ORDER BY r.created_at, r.id;

-- name: BudgetRequestListByMember :many
SELECT * FROM budget_request WHERE team_id = @team_id AND member_id = @member_id
ORDER BY created_at DESC, id DESC LIMIT @max;

-- name: BudgetGrantSum :one
-- What a member was granted in one period; auto_only picks the auto-approved grants.
SELECT coalesce(sum(amount_micros), 0)::bigint FROM budget_request
WHERE team_id = @team_id AND member_id = @member_id AND status = 'approved'
    AND budget_period = @budget_period AND period_start = @period_start AND (auto_approved OR NOT @auto_only::boolean);

-- name: BudgetGrantListSince :many
-- For the config snapshot: the grants of periods that may still be current.
SELECT member_id, budget_period, period_start, sum(amount_micros)::bigint AS amount_micros FROM budget_request
WHERE status = 'approved' AND (period_start >= @since OR budget_period = 'total')
GROUP BY member_id, budget_period, period_start;

-- name: BudgetRequestPendingCount :one
SELECT count(*)::bigint FROM budget_request WHERE team_id = @team_id AND member_id = @member_id AND status = 'pending';
