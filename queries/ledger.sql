-- name: LedgerUpsert :many
-- Many requests' rows in one statement, one element of each array a row; no
-- request may come twice. A row already settled, uncertain, implausible or
-- released is final: a late 'held' write (batches may arrive out of order across
-- flushes) never reverts it, and no row comes back for it. The status that comes
-- back is what this write made the row: a final one is new to Postgres. Arrays
-- carry no NULLs here, so 0 stands for no route or HTTP status and the zero
-- time (year 1) for not settled.
INSERT INTO ledger (team_id, request_id, member_id, key_id, route_id, model, status, http_status,
    input_tokens, output_tokens, cache_write_tokens, cache_read_tokens, reasoning_tokens,
    held_micros, cost_micros, created_at, settled_at)
SELECT r.team_id, r.request_id, r.member_id, r.key_id, nullif(r.route_id, 0), r.model, r.status,
    nullif(r.http_status, 0), r.input_tokens, r.output_tokens, r.cache_write_tokens, r.cache_read_tokens,
    r.reasoning_tokens, r.held_micros, r.cost_micros, r.created_at,
    nullif(r.settled_at, '0001-01-01 00:00:00+00'::timestamptz)
FROM (SELECT unnest(@team_ids::bigint[]) AS team_id, unnest(@request_ids::text[]) AS request_id,
    unnest(@member_ids::bigint[]) AS member_id, unnest(@key_ids::text[]) AS key_id,
    unnest(@route_ids::bigint[]) AS route_id, unnest(@models::text[]) AS model,
    unnest(@statuses::text[]) AS status, unnest(@http_statuses::int[]) AS http_status,
    unnest(@input_tokens::bigint[]) AS input_tokens, unnest(@output_tokens::bigint[]) AS output_tokens,
    unnest(@cache_write_tokens::bigint[]) AS cache_write_tokens,
    unnest(@cache_read_tokens::bigint[]) AS cache_read_tokens,
    unnest(@reasoning_tokens::bigint[]) AS reasoning_tokens, unnest(@held_micros::bigint[]) AS held_micros,
    unnest(@cost_micros::bigint[]) AS cost_micros, unnest(@created_ats::timestamptz[]) AS created_at,
    unnest(@settled_ats::timestamptz[]) AS settled_at) AS r
ON CONFLICT (team_id, request_id) DO UPDATE SET
    status = excluded.status, http_status = excluded.http_status,
    input_tokens = excluded.input_tokens, output_tokens = excluded.output_tokens,
    cache_write_tokens = excluded.cache_write_tokens, cache_read_tokens = excluded.cache_read_tokens,
    reasoning_tokens = excluded.reasoning_tokens, cost_micros = excluded.cost_micros,
    settled_at = excluded.settled_at
WHERE ledger.status = 'held'
RETURNING team_id, request_id, status;

-- name: LedgerList :many
SELECT * FROM ledger
WHERE team_id = @team_id
  AND (sqlc.narg('member_id')::bigint IS NULL OR member_id = sqlc.narg('member_id'))
  AND created_at >= @since
ORDER BY created_at DESC, request_id
LIMIT @max_rows;

-- name: LedgerSpendSince :many
-- Spend per member since a period start, for rebuilding admission counters:
-- settled, uncertain and implausible rows count their cost; rows still held are in
-- flight and are charged when they settle. A cost outside 0..@max_request_micros
-- (no request costs that: a row written before usage was judged, or by hand) counts
-- the row's hold instead, and the sum saturates at @max_spent, so one absurd row
-- neither fails the rebuild (bigint out of range) nor spends the team's budget.
SELECT member_id, least(coalesce(sum(
        CASE WHEN cost_micros BETWEEN 0 AND @max_request_micros::bigint THEN cost_micros
             ELSE least(greatest(held_micros, 0), @max_spent::bigint) END), 0),
    @max_spent::bigint)::bigint AS spent
FROM ledger
WHERE team_id = @team_id AND created_at >= @since AND status IN ('settled', 'uncertain', 'implausible')
GROUP BY member_id;

-- name: LedgerHeldSince :many
-- Rows still held (requests in flight) created since @since, for rebuilding their
-- holds after Redis lost them.
SELECT request_id, member_id, key_id, route_id, model, held_micros, created_at FROM ledger
WHERE team_id = @team_id AND status = 'held' AND created_at >= @since
ORDER BY created_at, request_id;

-- name: LedgerPage :many
-- One page of a team's ledger, newest first, filtered; the cursor is the last
-- row of the previous page (created_at, request_id), NULL for the first page.
SELECT * FROM ledger
WHERE team_id = @team_id
  AND (sqlc.narg('member_id')::bigint IS NULL OR member_id = sqlc.narg('member_id'))
  AND (sqlc.narg('model')::text IS NULL OR model = sqlc.narg('model'))
  AND (sqlc.narg('status')::text IS NULL OR status = sqlc.narg('status'))
  AND created_at >= @since
  AND created_at < @until
  AND (sqlc.narg('after_at')::timestamptz IS NULL
       OR (created_at, request_id) < (sqlc.narg('after_at')::timestamptz, sqlc.narg('after_request_id')::text))
ORDER BY created_at DESC, request_id DESC
LIMIT @max_rows;
