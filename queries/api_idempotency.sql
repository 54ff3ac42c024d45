-- name: IdempotencyClaim :one
-- Claims a key for a request about to be served; no row back means the key is
-- already taken (by a finished request or one still in flight).
INSERT INTO api_idempotency (scope, key, request_hash)
VALUES (@scope, @key, @request_hash)
ON CONFLICT (scope, key) DO NOTHING
RETURNING scope;

-- name: IdempotencyGet :one
SELECT * FROM api_idempotency WHERE scope = @scope AND key = @key;

-- name: IdempotencyFinish :exec
UPDATE api_idempotency SET status = @status, content_type = @content_type, body = @body
WHERE scope = @scope AND key = @key;

-- name: IdempotencyRelease :exec
-- Frees a key whose request failed on the server's side, so a retry runs again.
DELETE FROM api_idempotency WHERE scope = @scope AND key = @key AND status IS NULL;

-- name: IdempotencyExpire :exec
DELETE FROM api_idempotency WHERE created_at < @before;
