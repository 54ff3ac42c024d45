-- name: WebhookCreate :one
INSERT INTO webhook (team_id, name, url, format, secret) VALUES (@team_id, @name, @url, @format, @secret)
RETURNING *;

-- name: WebhookGet :one
SELECT * FROM webhook WHERE team_id = @team_id AND id = @id;

-- name: WebhookList :many
-- Each webhook with its latest delivery, for the console's "last error".
SELECT w.id, w.team_id, w.name, w.url, w.format, w.created_at,
    coalesce(d.event_type, '')::text AS last_event, coalesce(d.attempts, 0)::integer AS last_attempts,
    d.delivered_at AS last_delivered_at, d.failed_at AS last_failed_at, d.last_error
FROM webhook w
LEFT JOIN LATERAL (SELECT * FROM webhook_delivery WHERE webhook_id = w.id ORDER BY created_at DESC, id DESC LIMIT 1) d ON true
WHERE w.team_id = @team_id ORDER BY w.name;

-- name: WebhookDelete :one
DELETE FROM webhook WHERE team_id = @team_id AND id = @id RETURNING *;

-- name: WebhookTeamsWithAny :many
SELECT DISTINCT team_id FROM webhook;

-- name: WebhookDeliveryEnqueue :execrows
-- One row per webhook of the team; the same event queued twice is one row.
INSERT INTO webhook_delivery (webhook_id, team_id, event_id, event_type, payload)
SELECT w.id, w.team_id, @event_id, @event_type, @payload FROM webhook w WHERE w.team_id = @team_id
    AND (sqlc.narg('webhook_id')::bigint IS NULL OR w.id = sqlc.narg('webhook_id'))
ON CONFLICT (webhook_id, event_id) DO NOTHING;

-- name: WebhookDeliveryClaim :many
-- Leases up to max due deliveries to the caller: skipped by every other
-- replica while locked, and not due again until the lease ends.
UPDATE webhook_delivery d SET attempts = d.attempts + 1,
    next_attempt_at = now() + make_interval(secs => @lease_seconds::float8)
FROM webhook w
WHERE w.id = d.webhook_id AND d.id IN (
    SELECT id FROM webhook_delivery
    WHERE delivered_at IS NULL AND failed_at IS NULL AND next_attempt_at <= now()
    ORDER BY next_attempt_at LIMIT @max FOR UPDATE SKIP LOCKED)
RETURNING d.id, d.event_id, d.event_type, d.payload, d.attempts, d.created_at, w.url, w.format, w.secret;

-- name: WebhookDeliveryDone :exec
UPDATE webhook_delivery SET delivered_at = now(), last_error = NULL WHERE id = @id;

-- name: WebhookDeliveryRetry :exec
-- After a failed attempt: again after backoff, or never once attempts ran out.
UPDATE webhook_delivery SET last_error = @last_error,
    next_attempt_at = now() + make_interval(secs => @backoff_seconds::float8),
    failed_at = CASE WHEN attempts >= @max_attempts::integer THEN now() END
WHERE id = @id;

-- name: AlertMarkInsert :execrows
-- 1 for the one caller that marks first, 0 for every other.
INSERT INTO alert_mark (team_id, mark) VALUES (@team_id, @mark) ON CONFLICT DO NOTHING;
