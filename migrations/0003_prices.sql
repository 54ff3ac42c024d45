-- +goose Up
-- Prices per model in integer micro-dollars per million tokens (MTok), seeded from the
-- public list prices in @pydantic/genai-prices 0.1.8 (MIT), Anthropic and OpenAI entries,
-- taken on 2026-11-30: $3 per MTok is 3000000. Where an entry has several dated prices, the
-- one in force on 2026-11-30. Every row is one exact model name: an entry's own id, its exact
-- aliases, and the dated Anthropic snapshot names its prefix rule covers that we know of.
-- Not seeded: audio, realtime, image, transcription, TTS and moderation models, and
-- fine-tune prefixes (not one name each). Per-call fees (web search) are not modelled.
-- Every conversion is exact (no listed price has more precision than a micro-dollar).
-- A cache rate the data lacks is the input rate (cached tokens billed as plain input,
-- never $0); a 1-hour cache-write rate it lacks is the cache-write rate; embeddings
-- have output 0 and max_output_tokens 1 (they produce none). max_output_tokens is not
-- in the data: it is each model's documented maximum output, or 128000 where marked
-- "max output not documented": a conservative high value (a request without a ceiling
-- is held at it; a ceiling above it is refused). claude-3-7-sonnet: 128000, the maximum
-- with the output-128k beta header. Tiers: above tier_threshold_tokens prompt tokens the
-- tier rates apply to the whole request (genai-prices' tier start, compared with >).
-- ON CONFLICT DO NOTHING: re-running never overwrites a price an owner has edited.

ALTER TABLE price
    ADD COLUMN cache_write_1h_micros_per_mtok      bigint NOT NULL DEFAULT 0 CHECK (cache_write_1h_micros_per_mtok >= 0),
    ADD COLUMN tier_cache_write_micros_per_mtok    bigint CHECK (tier_cache_write_micros_per_mtok >= 0),
    ADD COLUMN tier_cache_write_1h_micros_per_mtok bigint CHECK (tier_cache_write_1h_micros_per_mtok >= 0),
    ADD COLUMN tier_cache_read_micros_per_mtok     bigint CHECK (tier_cache_read_micros_per_mtok >= 0),
    ADD CONSTRAINT price_tier_threshold_positive CHECK (tier_threshold_tokens IS NULL OR tier_threshold_tokens > 0);

INSERT INTO price (model, provider, input_micros_per_mtok, output_micros_per_mtok,
    cache_write_micros_per_mtok, cache_write_1h_micros_per_mtok, cache_read_micros_per_mtok, max_output_tokens,
    tier_threshold_tokens, tier_input_micros_per_mtok, tier_output_micros_per_mtok,
    tier_cache_write_micros_per_mtok, tier_cache_write_1h_micros_per_mtok, tier_cache_read_micros_per_mtok, taken_on)
VALUES
    ('claude-2', 'anthropic', 8000000, 24000000, 8000000, 8000000, 8000000, 4096, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('claude-2.0', 'anthropic', 8000000, 24000000, 8000000, 8000000, 8000000, 4096, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as claude-2
    ('claude-2.1', 'anthropic', 8000000, 24000000, 8000000, 8000000, 8000000, 4096, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as claude-2
    ('claude-3-5-haiku-latest', 'anthropic', 800000, 4000000, 1000000, 1600000, 80000, 8192, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('claude-3-5-haiku-20241022', 'anthropic', 800000, 4000000, 1000000, 1600000, 80000, 8192, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as claude-3-5-haiku-latest
    ('claude-3-5-sonnet', 'anthropic', 3000000, 15000000, 3750000, 6000000, 300000, 8192, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('claude-3-5-sonnet-20240620', 'anthropic', 3000000, 15000000, 3750000, 6000000, 300000, 8192, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as claude-3-5-sonnet
    ('claude-3-5-sonnet-20241022', 'anthropic', 3000000, 15000000, 3750000, 6000000, 300000, 8192, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as claude-3-5-sonnet
    ('claude-3-5-sonnet-latest', 'anthropic', 3000000, 15000000, 3750000, 6000000, 300000, 8192, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as claude-3-5-sonnet
    ('claude-3-7-sonnet-latest', 'anthropic', 3000000, 15000000, 3750000, 6000000, 300000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('claude-3-7-sonnet-20250219', 'anthropic', 3000000, 15000000, 3750000, 6000000, 300000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as claude-3-7-sonnet-latest
    ('claude-3-haiku', 'anthropic', 250000, 1250000, 300000, 500000, 30000, 4096, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('claude-3-haiku-20240307', 'anthropic', 250000, 1250000, 300000, 500000, 30000, 4096, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as claude-3-haiku
    ('claude-3-opus-latest', 'anthropic', 15000000, 75000000, 18750000, 30000000, 1500000, 4096, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('claude-3-opus-20240229', 'anthropic', 15000000, 75000000, 18750000, 30000000, 1500000, 4096, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as claude-3-opus-latest
    ('claude-3-sonnet', 'anthropic', 3000000, 15000000, 3750000, 6000000, 300000, 4096, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('claude-3-sonnet-20240229', 'anthropic', 3000000, 15000000, 3750000, 6000000, 300000, 4096, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as claude-3-sonnet
    ('claude-fable-5', 'anthropic', 10000000, 50000000, 12500000, 20000000, 1000000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- max output not documented
    ('claude-fable-5-1', 'anthropic', 10000000, 50000000, 12500000, 20000000, 250000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- max output not documented
    ('claude-haiku-4-5', 'anthropic', 1000000, 5000000, 1250000, 2000000, 100000, 64000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('claude-haiku-4-5-20251001', 'anthropic', 1000000, 5000000, 1250000, 2000000, 100000, 64000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as claude-haiku-4-5
    ('claude-opus-4-0', 'anthropic', 15000000, 75000000, 18750000, 30000000, 1500000, 32000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('claude-opus-4', 'anthropic', 15000000, 75000000, 18750000, 30000000, 1500000, 32000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as claude-opus-4-0
    ('claude-opus-4-20250514', 'anthropic', 15000000, 75000000, 18750000, 30000000, 1500000, 32000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as claude-opus-4-0
    ('claude-opus-4-1', 'anthropic', 15000000, 75000000, 18750000, 30000000, 1500000, 32000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('claude-opus-4-1-20250805', 'anthropic', 15000000, 75000000, 18750000, 30000000, 1500000, 32000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as claude-opus-4-1
    ('claude-opus-4-5', 'anthropic', 5000000, 25000000, 6250000, 10000000, 500000, 64000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('claude-opus-4-5-20251101', 'anthropic', 5000000, 25000000, 6250000, 10000000, 500000, 64000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as claude-opus-4-5
    ('claude-opus-4-6', 'anthropic', 5000000, 25000000, 6250000, 10000000, 500000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('claude-opus-4-7', 'anthropic', 5000000, 25000000, 6250000, 10000000, 500000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- max output not documented
    ('claude-opus-4-8', 'anthropic', 5000000, 25000000, 6250000, 10000000, 500000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- max output not documented
    ('claude-opus-5', 'anthropic', 5000000, 25000000, 6250000, 10000000, 500000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- max output not documented
    ('claude-opus-5-5', 'anthropic', 4000000, 20000000, 5000000, 8000000, 200000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- max output not documented
    ('claude-sonnet-4-0', 'anthropic', 3000000, 15000000, 3750000, 6000000, 300000, 64000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('claude-sonnet-4', 'anthropic', 3000000, 15000000, 3750000, 6000000, 300000, 64000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as claude-sonnet-4-0
    ('claude-sonnet-4-20250514', 'anthropic', 3000000, 15000000, 3750000, 6000000, 300000, 64000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as claude-sonnet-4-0
    ('claude-sonnet-4-5', 'anthropic', 3000000, 15000000, 3750000, 6000000, 300000, 64000, 200000, 6000000, 22500000, 7500000, 12000000, 600000, DATE '2026-11-30'),
    ('claude-sonnet-4-5-20250929', 'anthropic', 3000000, 15000000, 3750000, 6000000, 300000, 64000, 200000, 6000000, 22500000, 7500000, 12000000, 600000, DATE '2026-11-30'),  -- priced as claude-sonnet-4-5
    ('claude-sonnet-4-6', 'anthropic', 3000000, 15000000, 3750000, 6000000, 300000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- max output not documented
    ('claude-sonnet-5', 'anthropic', 2000000, 10000000, 2500000, 4000000, 200000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- max output not documented
    ('claude-v1', 'anthropic', 8000000, 24000000, 8000000, 8000000, 8000000, 4096, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('ada', 'openai', 400000, 400000, 400000, 400000, 400000, 4096, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('text-ada-001', 'openai', 400000, 400000, 400000, 400000, 400000, 4096, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as ada
    ('babbage', 'openai', 500000, 500000, 500000, 500000, 500000, 4096, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('chatgpt-4o-latest', 'openai', 5000000, 15000000, 5000000, 5000000, 5000000, 16384, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('codex-mini', 'openai', 1500000, 6000000, 1500000, 1500000, 375000, 100000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('codex-mini-latest', 'openai', 1500000, 6000000, 1500000, 1500000, 375000, 100000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as codex-mini
    ('curie', 'openai', 2000000, 2000000, 2000000, 2000000, 2000000, 4096, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('text-curie-001', 'openai', 2000000, 2000000, 2000000, 2000000, 2000000, 4096, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as curie
    ('davinci', 'openai', 20000000, 20000000, 20000000, 20000000, 20000000, 4096, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('text-davinci-001', 'openai', 20000000, 20000000, 20000000, 20000000, 20000000, 4096, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as davinci
    ('gpt-3.5-0301', 'openai', 1500000, 2000000, 1500000, 1500000, 1500000, 4096, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('gpt-3.5-turbo-0301', 'openai', 1500000, 2000000, 1500000, 1500000, 1500000, 4096, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-3.5-0301
    ('gpt-3.5-turbo', 'openai', 500000, 1500000, 500000, 500000, 500000, 4096, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('gpt-35-turbo', 'openai', 500000, 1500000, 500000, 500000, 500000, 4096, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-3.5-turbo
    ('gpt-3.5-turbo-0125', 'openai', 500000, 1500000, 500000, 500000, 500000, 4096, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-3.5-turbo
    ('gpt-3.5-turbo-0613', 'openai', 1500000, 2000000, 1500000, 1500000, 1500000, 4096, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('gpt-3.5-turbo-1106', 'openai', 1000000, 2000000, 1000000, 1000000, 1000000, 4096, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('gpt-3.5-turbo-16k', 'openai', 3000000, 4000000, 3000000, 3000000, 3000000, 4096, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('gpt-3.5-turbo-16k-0613', 'openai', 3000000, 4000000, 3000000, 3000000, 3000000, 4096, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-3.5-turbo-16k
    ('gpt-35-turbo-16k-0613', 'openai', 3000000, 4000000, 3000000, 3000000, 3000000, 4096, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-3.5-turbo-16k
    ('gpt-35-turbo-16k', 'openai', 3000000, 4000000, 3000000, 3000000, 3000000, 4096, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-3.5-turbo-16k
    ('gpt-3.5-turbo-instruct', 'openai', 1500000, 2000000, 1500000, 1500000, 1500000, 4096, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('gpt-3.5-turbo-instruct-0914', 'openai', 1500000, 2000000, 1500000, 1500000, 1500000, 4096, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-3.5-turbo-instruct
    ('gpt-4', 'openai', 30000000, 60000000, 30000000, 30000000, 30000000, 8192, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('gpt-4-0314', 'openai', 30000000, 60000000, 30000000, 30000000, 30000000, 8192, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-4
    ('gpt-4-0613', 'openai', 30000000, 60000000, 30000000, 30000000, 30000000, 8192, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-4
    ('gpt-4-32k', 'openai', 60000000, 120000000, 60000000, 60000000, 60000000, 32768, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('gpt-4-32k-0314', 'openai', 60000000, 120000000, 60000000, 60000000, 60000000, 32768, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-4-32k
    ('gpt-4-32k-0613', 'openai', 60000000, 120000000, 60000000, 60000000, 60000000, 32768, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-4-32k
    ('gpt-4-turbo', 'openai', 10000000, 30000000, 10000000, 10000000, 10000000, 4096, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('gpt-4-turbo-2024-04-09', 'openai', 10000000, 30000000, 10000000, 10000000, 10000000, 4096, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-4-turbo
    ('gpt-4-turbo-0125-preview', 'openai', 10000000, 30000000, 10000000, 10000000, 10000000, 4096, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-4-turbo
    ('gpt-4-0125-preview', 'openai', 10000000, 30000000, 10000000, 10000000, 10000000, 4096, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-4-turbo
    ('gpt-4-1106-preview', 'openai', 10000000, 30000000, 10000000, 10000000, 10000000, 4096, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-4-turbo
    ('gpt-4-turbo-preview', 'openai', 10000000, 30000000, 10000000, 10000000, 10000000, 4096, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-4-turbo
    ('gpt-4-vision-preview', 'openai', 10000000, 30000000, 10000000, 10000000, 10000000, 4096, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('gpt-4-1106-vision-preview', 'openai', 10000000, 30000000, 10000000, 10000000, 10000000, 4096, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-4-vision-preview
    ('gpt-4.1', 'openai', 2000000, 8000000, 2000000, 2000000, 500000, 32768, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('gpt-4.1-2025-04-14', 'openai', 2000000, 8000000, 2000000, 2000000, 500000, 32768, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-4.1
    ('gpt-4.1-mini', 'openai', 400000, 1600000, 400000, 400000, 100000, 32768, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('gpt-4.1-mini-2025-04-14', 'openai', 400000, 1600000, 400000, 400000, 100000, 32768, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-4.1-mini
    ('gpt-4.1-nano', 'openai', 100000, 400000, 100000, 100000, 25000, 32768, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('gpt-4.1-nano-2025-04-14', 'openai', 100000, 400000, 100000, 100000, 25000, 32768, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-4.1-nano
    ('gpt-4.5-preview', 'openai', 75000000, 150000000, 75000000, 75000000, 37500000, 16384, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('gpt-4o', 'openai', 2500000, 10000000, 2500000, 2500000, 1250000, 16384, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('gpt-4o-2024-08-06', 'openai', 2500000, 10000000, 2500000, 2500000, 1250000, 16384, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-4o
    ('gpt-4o-2024-11-20', 'openai', 2500000, 10000000, 2500000, 2500000, 1250000, 16384, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-4o
    ('gpt-4o-2024-05-13', 'openai', 5000000, 15000000, 5000000, 5000000, 5000000, 4096, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('gpt-4o-mini', 'openai', 150000, 600000, 150000, 150000, 75000, 16384, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('gpt-4o-mini-2024-07-18', 'openai', 150000, 600000, 150000, 150000, 75000, 16384, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-4o-mini
    ('gpt-4o-mini-search-preview', 'openai', 150000, 600000, 150000, 150000, 75000, 16384, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-4o-mini
    ('gpt-4o-mini-search-preview-2025-03-11', 'openai', 150000, 600000, 150000, 150000, 75000, 16384, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-4o-mini
    ('gpt-4o-search-preview', 'openai', 2500000, 10000000, 2500000, 2500000, 2500000, 16384, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('gpt-4o-search-preview-2025-03-11', 'openai', 2500000, 10000000, 2500000, 2500000, 2500000, 16384, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-4o-search-preview
    ('gpt-5', 'openai', 1250000, 10000000, 1250000, 1250000, 125000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('gpt-5-2025-08-07', 'openai', 1250000, 10000000, 1250000, 1250000, 125000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-5
    ('gpt-5-chat', 'openai', 1250000, 10000000, 1250000, 1250000, 125000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-5
    ('gpt-5-chat-latest', 'openai', 1250000, 10000000, 1250000, 1250000, 125000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-5
    ('gpt-5-codex', 'openai', 1250000, 10000000, 1250000, 1250000, 125000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-5
    ('gpt-5-mini', 'openai', 250000, 2000000, 250000, 250000, 25000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('gpt-5-mini-2025-08-07', 'openai', 250000, 2000000, 250000, 250000, 25000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-5-mini
    ('gpt-5-nano', 'openai', 50000, 400000, 50000, 50000, 5000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('gpt-5-pro', 'openai', 15000000, 120000000, 15000000, 15000000, 15000000, 272000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('gpt-5-pro-2025-10-06', 'openai', 15000000, 120000000, 15000000, 15000000, 15000000, 272000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-5-pro
    ('gpt-5.1', 'openai', 1250000, 10000000, 1250000, 1250000, 125000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('gpt-5.1-2025-11-13', 'openai', 1250000, 10000000, 1250000, 1250000, 125000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-5.1
    ('gpt-5.1-codex', 'openai', 1250000, 10000000, 1250000, 1250000, 125000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-5.1
    ('gpt-5.1-codex-max', 'openai', 1250000, 10000000, 1250000, 1250000, 125000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-5.1
    ('gpt-5.1-chat', 'openai', 1250000, 10000000, 1250000, 1250000, 125000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-5.1
    ('gpt-5.1-chat-latest', 'openai', 1250000, 10000000, 1250000, 1250000, 125000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-5.1
    ('gpt-5-1', 'openai', 1250000, 10000000, 1250000, 1250000, 125000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-5.1
    ('gpt-5-1-2025-11-13', 'openai', 1250000, 10000000, 1250000, 1250000, 125000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-5.1
    ('gpt-5-1-codex', 'openai', 1250000, 10000000, 1250000, 1250000, 125000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-5.1
    ('gpt-5-1-codex-max', 'openai', 1250000, 10000000, 1250000, 1250000, 125000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-5.1
    ('gpt-5-1-chat', 'openai', 1250000, 10000000, 1250000, 1250000, 125000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-5.1
    ('gpt-5-1-chat-latest', 'openai', 1250000, 10000000, 1250000, 1250000, 125000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-5.1
    ('gpt-5.1-codex-mini', 'openai', 250000, 2000000, 250000, 250000, 25000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('gpt-5.1-mini', 'openai', 250000, 2000000, 250000, 250000, 25000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-5.1-codex-mini
    ('gpt-5-1-codex-mini', 'openai', 250000, 2000000, 250000, 250000, 25000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-5.1-codex-mini
    ('gpt-5-1-mini', 'openai', 250000, 2000000, 250000, 250000, 25000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-5.1-codex-mini
    ('gpt-5.2', 'openai', 1750000, 14000000, 1750000, 1750000, 175000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('gpt-5.2-2025-12-11', 'openai', 1750000, 14000000, 1750000, 1750000, 175000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-5.2
    ('gpt-5-2', 'openai', 1750000, 14000000, 1750000, 1750000, 175000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-5.2
    ('gpt-5-2-2025-12-11', 'openai', 1750000, 14000000, 1750000, 1750000, 175000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-5.2
    ('gpt-5.2-chat', 'openai', 1750000, 14000000, 1750000, 1750000, 175000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-5.2
    ('gpt-5.2-chat-latest', 'openai', 1750000, 14000000, 1750000, 1750000, 175000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-5.2
    ('gpt-5-2-chat', 'openai', 1750000, 14000000, 1750000, 1750000, 175000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-5.2
    ('gpt-5-2-chat-latest', 'openai', 1750000, 14000000, 1750000, 1750000, 175000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-5.2
    ('gpt-5.2-codex', 'openai', 1750000, 14000000, 1750000, 1750000, 175000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-5.2
    ('gpt-5-2-codex', 'openai', 1750000, 14000000, 1750000, 1750000, 175000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as gpt-5.2
    ('gpt-5.2-pro', 'openai', 21000000, 168000000, 21000000, 21000000, 21000000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- max output not documented
    ('gpt-5.2-pro-2025-12-11', 'openai', 21000000, 168000000, 21000000, 21000000, 21000000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- max output not documented; priced as gpt-5.2-pro
    ('gpt-5-2-pro-2025-12-11', 'openai', 21000000, 168000000, 21000000, 21000000, 21000000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- max output not documented; priced as gpt-5.2-pro
    ('gpt-5.3', 'openai', 1750000, 14000000, 1750000, 1750000, 175000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- max output not documented
    ('gpt-5-3', 'openai', 1750000, 14000000, 1750000, 1750000, 175000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- max output not documented; priced as gpt-5.3
    ('gpt-5.3-chat', 'openai', 1750000, 14000000, 1750000, 1750000, 175000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- max output not documented; priced as gpt-5.3
    ('gpt-5.3-chat-latest', 'openai', 1750000, 14000000, 1750000, 1750000, 175000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- max output not documented; priced as gpt-5.3
    ('gpt-5-3-chat', 'openai', 1750000, 14000000, 1750000, 1750000, 175000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- max output not documented; priced as gpt-5.3
    ('gpt-5-3-chat-latest', 'openai', 1750000, 14000000, 1750000, 1750000, 175000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- max output not documented; priced as gpt-5.3
    ('gpt-5.3-codex', 'openai', 1750000, 14000000, 1750000, 1750000, 175000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- max output not documented
    ('gpt-5-3-codex', 'openai', 1750000, 14000000, 1750000, 1750000, 175000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- max output not documented; priced as gpt-5.3-codex
    ('gpt-5.4', 'openai', 2500000, 15000000, 2500000, 2500000, 250000, 128000, 271999, 5000000, 22500000, 5000000, 5000000, 500000, DATE '2026-11-30'),  -- max output not documented
    ('gpt-5.4-2026-03-05', 'openai', 2500000, 15000000, 2500000, 2500000, 250000, 128000, 271999, 5000000, 22500000, 5000000, 5000000, 500000, DATE '2026-11-30'),  -- max output not documented; priced as gpt-5.4
    ('gpt-5-4', 'openai', 2500000, 15000000, 2500000, 2500000, 250000, 128000, 271999, 5000000, 22500000, 5000000, 5000000, 500000, DATE '2026-11-30'),  -- max output not documented; priced as gpt-5.4
    ('gpt-5-4-2026-03-05', 'openai', 2500000, 15000000, 2500000, 2500000, 250000, 128000, 271999, 5000000, 22500000, 5000000, 5000000, 500000, DATE '2026-11-30'),  -- max output not documented; priced as gpt-5.4
    ('gpt-5.4-mini', 'openai', 750000, 4500000, 750000, 750000, 75000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- max output not documented
    ('gpt-5.4-mini-2026-03-17', 'openai', 750000, 4500000, 750000, 750000, 75000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- max output not documented; priced as gpt-5.4-mini
    ('gpt-5-4-mini', 'openai', 750000, 4500000, 750000, 750000, 75000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- max output not documented; priced as gpt-5.4-mini
    ('gpt-5-4-mini-2026-03-17', 'openai', 750000, 4500000, 750000, 750000, 75000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- max output not documented; priced as gpt-5.4-mini
    ('gpt-5.4-nano', 'openai', 200000, 1250000, 200000, 200000, 20000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- max output not documented
    ('gpt-5.4-nano-2026-03-17', 'openai', 200000, 1250000, 200000, 200000, 20000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- max output not documented; priced as gpt-5.4-nano
    ('gpt-5-4-nano', 'openai', 200000, 1250000, 200000, 200000, 20000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- max output not documented; priced as gpt-5.4-nano
    ('gpt-5-4-nano-2026-03-17', 'openai', 200000, 1250000, 200000, 200000, 20000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- max output not documented; priced as gpt-5.4-nano
    ('gpt-5.4-pro', 'openai', 30000000, 180000000, 30000000, 30000000, 30000000, 128000, 271999, 60000000, 270000000, 60000000, 60000000, 60000000, DATE '2026-11-30'),  -- max output not documented
    ('gpt-5.4-pro-2026-03-05', 'openai', 30000000, 180000000, 30000000, 30000000, 30000000, 128000, 271999, 60000000, 270000000, 60000000, 60000000, 60000000, DATE '2026-11-30'),  -- max output not documented; priced as gpt-5.4-pro
    ('gpt-5-4-pro', 'openai', 30000000, 180000000, 30000000, 30000000, 30000000, 128000, 271999, 60000000, 270000000, 60000000, 60000000, 60000000, DATE '2026-11-30'),  -- max output not documented; priced as gpt-5.4-pro
    ('gpt-5-4-pro-2026-03-05', 'openai', 30000000, 180000000, 30000000, 30000000, 30000000, 128000, 271999, 60000000, 270000000, 60000000, 60000000, 60000000, DATE '2026-11-30'),  -- max output not documented; priced as gpt-5.4-pro
    ('gpt-5.5', 'openai', 5000000, 30000000, 5000000, 5000000, 500000, 128000, 271999, 10000000, 45000000, 10000000, 10000000, 1000000, DATE '2026-11-30'),  -- max output not documented
    ('gpt-5.5-2026-04-23', 'openai', 5000000, 30000000, 5000000, 5000000, 500000, 128000, 271999, 10000000, 45000000, 10000000, 10000000, 1000000, DATE '2026-11-30'),  -- max output not documented; priced as gpt-5.5
    ('gpt-5.5-2026-04-24', 'openai', 5000000, 30000000, 5000000, 5000000, 500000, 128000, 271999, 10000000, 45000000, 10000000, 10000000, 1000000, DATE '2026-11-30'),  -- max output not documented; priced as gpt-5.5
    ('gpt-5-5', 'openai', 5000000, 30000000, 5000000, 5000000, 500000, 128000, 271999, 10000000, 45000000, 10000000, 10000000, 1000000, DATE '2026-11-30'),  -- max output not documented; priced as gpt-5.5
    ('gpt-5-5-2026-04-23', 'openai', 5000000, 30000000, 5000000, 5000000, 500000, 128000, 271999, 10000000, 45000000, 10000000, 10000000, 1000000, DATE '2026-11-30'),  -- max output not documented; priced as gpt-5.5
    ('gpt-5-5-2026-04-24', 'openai', 5000000, 30000000, 5000000, 5000000, 500000, 128000, 271999, 10000000, 45000000, 10000000, 10000000, 1000000, DATE '2026-11-30'),  -- max output not documented; priced as gpt-5.5
    ('gpt-5.5-chat', 'openai', 5000000, 30000000, 5000000, 5000000, 500000, 128000, 271999, 10000000, 45000000, 10000000, 10000000, 1000000, DATE '2026-11-30'),  -- max output not documented; priced as gpt-5.5
    ('gpt-5.5-chat-latest', 'openai', 5000000, 30000000, 5000000, 5000000, 500000, 128000, 271999, 10000000, 45000000, 10000000, 10000000, 1000000, DATE '2026-11-30'),  -- max output not documented; priced as gpt-5.5
    ('gpt-5-5-chat', 'openai', 5000000, 30000000, 5000000, 5000000, 500000, 128000, 271999, 10000000, 45000000, 10000000, 10000000, 1000000, DATE '2026-11-30'),  -- max output not documented; priced as gpt-5.5
    ('gpt-5-5-chat-latest', 'openai', 5000000, 30000000, 5000000, 5000000, 500000, 128000, 271999, 10000000, 45000000, 10000000, 10000000, 1000000, DATE '2026-11-30'),  -- max output not documented; priced as gpt-5.5
    ('gpt-5.5-codex', 'openai', 5000000, 30000000, 5000000, 5000000, 500000, 128000, 271999, 10000000, 45000000, 10000000, 10000000, 1000000, DATE '2026-11-30'),  -- max output not documented; priced as gpt-5.5
    ('gpt-5-5-codex', 'openai', 5000000, 30000000, 5000000, 5000000, 500000, 128000, 271999, 10000000, 45000000, 10000000, 10000000, 1000000, DATE '2026-11-30'),  -- max output not documented; priced as gpt-5.5
    ('gpt-5.5-pro', 'openai', 30000000, 180000000, 30000000, 30000000, 30000000, 128000, 271999, 60000000, 270000000, 60000000, 60000000, 60000000, DATE '2026-11-30'),  -- max output not documented
    ('gpt-5.5-pro-2026-04-23', 'openai', 30000000, 180000000, 30000000, 30000000, 30000000, 128000, 271999, 60000000, 270000000, 60000000, 60000000, 60000000, DATE '2026-11-30'),  -- max output not documented; priced as gpt-5.5-pro
    ('gpt-5-5-pro', 'openai', 30000000, 180000000, 30000000, 30000000, 30000000, 128000, 271999, 60000000, 270000000, 60000000, 60000000, 60000000, DATE '2026-11-30'),  -- max output not documented; priced as gpt-5.5-pro
    ('gpt-5-5-pro-2026-04-23', 'openai', 30000000, 180000000, 30000000, 30000000, 30000000, 128000, 271999, 60000000, 270000000, 60000000, 60000000, 60000000, DATE '2026-11-30'),  -- max output not documented; priced as gpt-5.5-pro
    ('gpt-5.6-luna', 'openai', 200000, 1200000, 250000, 250000, 20000, 128000, 271999, 400000, 1800000, 500000, 500000, 40000, DATE '2026-11-30'),  -- max output not documented
    ('gpt-5-6-luna', 'openai', 200000, 1200000, 250000, 250000, 20000, 128000, 271999, 400000, 1800000, 500000, 500000, 40000, DATE '2026-11-30'),  -- max output not documented; priced as gpt-5.6-luna
    ('gpt-5.6-sol', 'openai', 4000000, 20000000, 5000000, 5000000, 400000, 128000, 271999, 8000000, 30000000, 10000000, 10000000, 800000, DATE '2026-11-30'),  -- max output not documented
    ('gpt-5-6-sol', 'openai', 4000000, 20000000, 5000000, 5000000, 400000, 128000, 271999, 8000000, 30000000, 10000000, 10000000, 800000, DATE '2026-11-30'),  -- max output not documented; priced as gpt-5.6-sol
    ('gpt-5.6', 'openai', 4000000, 20000000, 5000000, 5000000, 400000, 128000, 271999, 8000000, 30000000, 10000000, 10000000, 800000, DATE '2026-11-30'),  -- max output not documented; priced as gpt-5.6-sol
    ('gpt-5-6', 'openai', 4000000, 20000000, 5000000, 5000000, 400000, 128000, 271999, 8000000, 30000000, 10000000, 10000000, 800000, DATE '2026-11-30'),  -- max output not documented; priced as gpt-5.6-sol
    ('gpt-5.6-terra', 'openai', 2000000, 12000000, 2500000, 2500000, 200000, 128000, 271999, 4000000, 18000000, 5000000, 5000000, 400000, DATE '2026-11-30'),  -- max output not documented
    ('gpt-5-6-terra', 'openai', 2000000, 12000000, 2500000, 2500000, 200000, 128000, 271999, 4000000, 18000000, 5000000, 5000000, 400000, DATE '2026-11-30'),  -- max output not documented; priced as gpt-5.6-terra
    ('gpt-6-astra', 'openai', 10000000, 50000000, 12500000, 12500000, 1000000, 128000, 271999, 20000000, 75000000, 25000000, 25000000, 2000000, DATE '2026-11-30'),  -- max output not documented
    ('gpt-6-luna', 'openai', 100000, 500000, 125000, 125000, 10000, 128000, 272000, 200000, 750000, 250000, 250000, 20000, DATE '2026-11-30'),  -- max output not documented
    ('gpt-6-sol', 'openai', 2000000, 10000000, 2500000, 2500000, 200000, 128000, 272000, 4000000, 15000000, 5000000, 5000000, 400000, DATE '2026-11-30'),  -- max output not documented
    ('gpt-chat-latest', 'openai', 5000000, 30000000, 5000000, 5000000, 500000, 128000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- max output not documented
    ('gpt-oss-120b', 'openai', 39000, 180000, 39000, 39000, 39000, 131072, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('gpt-oss-20b', 'openai', 29000, 140000, 29000, 29000, 29000, 131072, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('gpt-oss-safeguard-20b', 'openai', 75000, 300000, 75000, 75000, 37000, 131072, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('o1', 'openai', 15000000, 60000000, 15000000, 15000000, 7500000, 100000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('o1-2024-12-17', 'openai', 15000000, 60000000, 15000000, 15000000, 7500000, 100000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as o1
    ('o1-mini', 'openai', 1100000, 4400000, 1100000, 1100000, 550000, 65536, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('o1-mini-2024-09-12', 'openai', 1100000, 4400000, 1100000, 1100000, 550000, 65536, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as o1-mini
    ('o1-preview', 'openai', 15000000, 60000000, 15000000, 15000000, 7500000, 32768, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('o1-preview-2024-09-12', 'openai', 15000000, 60000000, 15000000, 15000000, 7500000, 32768, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as o1-preview
    ('o1-pro', 'openai', 150000000, 600000000, 150000000, 150000000, 150000000, 100000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('o1-pro-2025-03-19', 'openai', 150000000, 600000000, 150000000, 150000000, 150000000, 100000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as o1-pro
    ('o3', 'openai', 2000000, 8000000, 2000000, 2000000, 500000, 100000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('o3-2025-04-16', 'openai', 2000000, 8000000, 2000000, 2000000, 500000, 100000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as o3
    ('o3-deep-research', 'openai', 10000000, 40000000, 10000000, 10000000, 2500000, 100000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('o3-deep-research-2025-06-26', 'openai', 10000000, 40000000, 10000000, 10000000, 2500000, 100000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as o3-deep-research
    ('o3-mini', 'openai', 1100000, 4400000, 1100000, 1100000, 550000, 100000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('o3-mini-2025-01-31', 'openai', 1100000, 4400000, 1100000, 1100000, 550000, 100000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as o3-mini
    ('o3-mini-high', 'openai', 1100000, 4400000, 1100000, 1100000, 550000, 100000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as o3-mini
    ('o3-pro', 'openai', 20000000, 80000000, 20000000, 20000000, 20000000, 100000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('o3-pro-2025-06-10', 'openai', 20000000, 80000000, 20000000, 20000000, 20000000, 100000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as o3-pro
    ('o4-mini', 'openai', 1100000, 4400000, 1100000, 1100000, 275000, 100000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('o4-mini-2025-04-16', 'openai', 1100000, 4400000, 1100000, 1100000, 275000, 100000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as o4-mini
    ('o4-mini-high', 'openai', 1100000, 4400000, 1100000, 1100000, 275000, 100000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as o4-mini
    ('o4-mini-deep-research', 'openai', 2000000, 8000000, 2000000, 2000000, 500000, 100000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('o4-mini-deep-research-2025-06-26', 'openai', 2000000, 8000000, 2000000, 2000000, 500000, 100000, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as o4-mini-deep-research
    ('text-davinci-002', 'openai', 20000000, 20000000, 20000000, 20000000, 20000000, 4096, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('text-davinci-003', 'openai', 20000000, 20000000, 20000000, 20000000, 20000000, 4096, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('text-embedding-3-large', 'openai', 130000, 0, 130000, 130000, 130000, 1, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('text-embedding-3-small', 'openai', 20000, 0, 20000, 20000, 20000, 1, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('text-embedding-ada-002', 'openai', 100000, 0, 100000, 100000, 100000, 1, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),
    ('text-embedding-ada', 'openai', 100000, 0, 100000, 100000, 100000, 1, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30'),  -- priced as text-embedding-ada-002
    ('text-embedding-ada-002-v2', 'openai', 100000, 0, 100000, 100000, 100000, 1, NULL, NULL, NULL, NULL, NULL, NULL, DATE '2026-11-30')  -- priced as text-embedding-ada-002
ON CONFLICT (model) DO NOTHING;

-- +goose Down
DELETE FROM price WHERE taken_on = DATE '2026-11-30' AND model IN (
    'claude-2', 'claude-2.0', 'claude-2.1', 'claude-3-5-haiku-latest', 'claude-3-5-haiku-20241022', 'claude-3-5-sonnet',
    'claude-3-5-sonnet-20240620', 'claude-3-5-sonnet-20241022', 'claude-3-5-sonnet-latest', 'claude-3-7-sonnet-latest', 'claude-3-7-sonnet-20250219', 'claude-3-haiku',
    'claude-3-haiku-20240307', 'claude-3-opus-latest', 'claude-3-opus-20240229', 'claude-3-sonnet', 'claude-3-sonnet-20240229', 'claude-fable-5',
    'claude-fable-5-1', 'claude-haiku-4-5', 'claude-haiku-4-5-20251001', 'claude-opus-4-0', 'claude-opus-4', 'claude-opus-4-20250514',
    'claude-opus-4-1', 'claude-opus-4-1-20250805', 'claude-opus-4-5', 'claude-opus-4-5-20251101', 'claude-opus-4-6', 'claude-opus-4-7',
    'claude-opus-4-8', 'claude-opus-5', 'claude-opus-5-5', 'claude-sonnet-4-0', 'claude-sonnet-4', 'claude-sonnet-4-20250514',
    'claude-sonnet-4-5', 'claude-sonnet-4-5-20250929', 'claude-sonnet-4-6', 'claude-sonnet-5', 'claude-v1', 'ada',
    'text-ada-001', 'babbage', 'chatgpt-4o-latest', 'codex-mini', 'codex-mini-latest', 'curie',
    'text-curie-001', 'davinci', 'text-davinci-001', 'gpt-3.5-0301', 'gpt-3.5-turbo-0301', 'gpt-3.5-turbo',
    'gpt-35-turbo', 'gpt-3.5-turbo-0125', 'gpt-3.5-turbo-0613', 'gpt-3.5-turbo-1106', 'gpt-3.5-turbo-16k', 'gpt-3.5-turbo-16k-0613',
    'gpt-35-turbo-16k-0613', 'gpt-35-turbo-16k', 'gpt-3.5-turbo-instruct', 'gpt-3.5-turbo-instruct-0914', 'gpt-4', 'gpt-4-0314',
    'gpt-4-0613', 'gpt-4-32k', 'gpt-4-32k-0314', 'gpt-4-32k-0613', 'gpt-4-turbo', 'gpt-4-turbo-2024-04-09',
    'gpt-4-turbo-0125-preview', 'gpt-4-0125-preview', 'gpt-4-1106-preview', 'gpt-4-turbo-preview', 'gpt-4-vision-preview', 'gpt-4-1106-vision-preview',
    'gpt-4.1', 'gpt-4.1-2025-04-14', 'gpt-4.1-mini', 'gpt-4.1-mini-2025-04-14', 'gpt-4.1-nano', 'gpt-4.1-nano-2025-04-14',
    'gpt-4.5-preview', 'gpt-4o', 'gpt-4o-2024-08-06', 'gpt-4o-2024-11-20', 'gpt-4o-2024-05-13', 'gpt-4o-mini',
    'gpt-4o-mini-2024-07-18', 'gpt-4o-mini-search-preview', 'gpt-4o-mini-search-preview-2025-03-11', 'gpt-4o-search-preview', 'gpt-4o-search-preview-2025-03-11', 'gpt-5',
    'gpt-5-2025-08-07', 'gpt-5-chat', 'gpt-5-chat-latest', 'gpt-5-codex', 'gpt-5-mini', 'gpt-5-mini-2025-08-07',
    'gpt-5-nano', 'gpt-5-pro', 'gpt-5-pro-2025-10-06', 'gpt-5.1', 'gpt-5.1-2025-11-13', 'gpt-5.1-codex',
    'gpt-5.1-codex-max', 'gpt-5.1-chat', 'gpt-5.1-chat-latest', 'gpt-5-1', 'gpt-5-1-2025-11-13', 'gpt-5-1-codex',
    'gpt-5-1-codex-max', 'gpt-5-1-chat', 'gpt-5-1-chat-latest', 'gpt-5.1-codex-mini', 'gpt-5.1-mini', 'gpt-5-1-codex-mini',
    'gpt-5-1-mini', 'gpt-5.2', 'gpt-5.2-2025-12-11', 'gpt-5-2', 'gpt-5-2-2025-12-11', 'gpt-5.2-chat',
    'gpt-5.2-chat-latest', 'gpt-5-2-chat', 'gpt-5-2-chat-latest', 'gpt-5.2-codex', 'gpt-5-2-codex', 'gpt-5.2-pro',
    'gpt-5.2-pro-2025-12-11', 'gpt-5-2-pro-2025-12-11', 'gpt-5.3', 'gpt-5-3', 'gpt-5.3-chat', 'gpt-5.3-chat-latest',
    'gpt-5-3-chat', 'gpt-5-3-chat-latest', 'gpt-5.3-codex', 'gpt-5-3-codex', 'gpt-5.4', 'gpt-5.4-2026-03-05',
    'gpt-5-4', 'gpt-5-4-2026-03-05', 'gpt-5.4-mini', 'gpt-5.4-mini-2026-03-17', 'gpt-5-4-mini', 'gpt-5-4-mini-2026-03-17',
    'gpt-5.4-nano', 'gpt-5.4-nano-2026-03-17', 'gpt-5-4-nano', 'gpt-5-4-nano-2026-03-17', 'gpt-5.4-pro', 'gpt-5.4-pro-2026-03-05',
    'gpt-5-4-pro', 'gpt-5-4-pro-2026-03-05', 'gpt-5.5', 'gpt-5.5-2026-04-23', 'gpt-5.5-2026-04-24', 'gpt-5-5',
    'gpt-5-5-2026-04-23', 'gpt-5-5-2026-04-24', 'gpt-5.5-chat', 'gpt-5.5-chat-latest', 'gpt-5-5-chat', 'gpt-5-5-chat-latest',
    'gpt-5.5-codex', 'gpt-5-5-codex', 'gpt-5.5-pro', 'gpt-5.5-pro-2026-04-23', 'gpt-5-5-pro', 'gpt-5-5-pro-2026-04-23',
    'gpt-5.6-luna', 'gpt-5-6-luna', 'gpt-5.6-sol', 'gpt-5-6-sol', 'gpt-5.6', 'gpt-5-6',
    'gpt-5.6-terra', 'gpt-5-6-terra', 'gpt-6-astra', 'gpt-6-luna', 'gpt-6-sol', 'gpt-chat-latest',
    'gpt-oss-120b', 'gpt-oss-20b', 'gpt-oss-safeguard-20b', 'o1', 'o1-2024-12-17', 'o1-mini',
    'o1-mini-2024-09-12', 'o1-preview', 'o1-preview-2024-09-12', 'o1-pro', 'o1-pro-2025-03-19', 'o3',
    'o3-2025-04-16', 'o3-deep-research', 'o3-deep-research-2025-06-26', 'o3-mini', 'o3-mini-2025-01-31', 'o3-mini-high',
    'o3-pro', 'o3-pro-2025-06-10', 'o4-mini', 'o4-mini-2025-04-16', 'o4-mini-high', 'o4-mini-deep-research',
    'o4-mini-deep-research-2025-06-26', 'text-davinci-002', 'text-davinci-003', 'text-embedding-3-large', 'text-embedding-3-small', 'text-embedding-ada-002',
    'text-embedding-ada', 'text-embedding-ada-002-v2'
);
ALTER TABLE price
    DROP CONSTRAINT price_tier_threshold_positive,
    DROP COLUMN cache_write_1h_micros_per_mtok, DROP COLUMN tier_cache_write_micros_per_mtok,
    DROP COLUMN tier_cache_write_1h_micros_per_mtok, DROP COLUMN tier_cache_read_micros_per_mtok;
