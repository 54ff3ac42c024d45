-- name: PriceList :many
SELECT * FROM price ORDER BY provider, model;

-- name: PriceGet :one
SELECT * FROM price WHERE model = @model;

-- name: PriceUpsert :one
-- taken_on defaults to today (the database's date) unless given.
INSERT INTO price (model, provider, input_micros_per_mtok, output_micros_per_mtok,
    cache_write_micros_per_mtok, cache_write_1h_micros_per_mtok, cache_read_micros_per_mtok, max_output_tokens,
    tier_threshold_tokens, tier_input_micros_per_mtok, tier_output_micros_per_mtok,
    tier_cache_write_micros_per_mtok, tier_cache_write_1h_micros_per_mtok, tier_cache_read_micros_per_mtok, taken_on)
VALUES (@model, @provider, @input_micros_per_mtok, @output_micros_per_mtok,
    @cache_write_micros_per_mtok, @cache_write_1h_micros_per_mtok, @cache_read_micros_per_mtok, @max_output_tokens,
    @tier_threshold_tokens, @tier_input_micros_per_mtok, @tier_output_micros_per_mtok,
    @tier_cache_write_micros_per_mtok, @tier_cache_write_1h_micros_per_mtok, @tier_cache_read_micros_per_mtok,
    coalesce(sqlc.narg('taken_on')::date, current_date))
ON CONFLICT (model) DO UPDATE SET
    provider = excluded.provider,
    input_micros_per_mtok = excluded.input_micros_per_mtok,
    output_micros_per_mtok = excluded.output_micros_per_mtok,
    cache_write_micros_per_mtok = excluded.cache_write_micros_per_mtok,
    cache_write_1h_micros_per_mtok = excluded.cache_write_1h_micros_per_mtok,
    cache_read_micros_per_mtok = excluded.cache_read_micros_per_mtok,
    max_output_tokens = excluded.max_output_tokens,
    tier_threshold_tokens = excluded.tier_threshold_tokens,
    tier_input_micros_per_mtok = excluded.tier_input_micros_per_mtok,
    tier_output_micros_per_mtok = excluded.tier_output_micros_per_mtok,
    tier_cache_write_micros_per_mtok = excluded.tier_cache_write_micros_per_mtok,
    tier_cache_write_1h_micros_per_mtok = excluded.tier_cache_write_1h_micros_per_mtok,
    tier_cache_read_micros_per_mtok = excluded.tier_cache_read_micros_per_mtok,
    taken_on = excluded.taken_on,
    updated_at = now()
RETURNING *;
