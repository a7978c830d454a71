-- Model calls with missing or suspicious fields (spec §6.2 #14, check_session.py's warnings),
-- in one pass. typeof() on the body column reads its header, not its 256 KiB of text.
SELECT id, reason
FROM (
    SELECT id, rtrim(
        CASE WHEN model IS NULL THEN 'model is NULL; ' ELSE '' END
        || CASE WHEN input_tokens IS NULL AND output_tokens IS NULL
                THEN 'input and output tokens are NULL; ' ELSE '' END
        || CASE WHEN typeof(request_body_preview) = 'null'
                THEN 'request body not captured; ' ELSE '' END
        || CASE WHEN status_code IS NOT 200
                THEN printf('status %s; ', COALESCE(status_code, 'NULL')) ELSE '' END
        || CASE WHEN estimated_cost_usd = 0 AND (input_tokens > 0 OR output_tokens > 0)
                     AND provider IN ('anthropic', 'openai', 'google')
                THEN 'cost 0 despite tokens (model not in the pricing table); ' ELSE '' END,
        '; ') AS reason
    FROM model_calls
)
WHERE reason <> ''
ORDER BY id
