INSERT INTO model_usage (session_id, provider, model, day, calls, input_tokens, output_tokens,
    cache_read_tokens, thinking_tokens, cost_usd, duration_ms)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
