-- list_sessions.py as a query. Every parameter arrives as text: `flags` turns each into 0/1,
-- or NULL when it is not a recognised value, and a NULL anywhere selects nothing.
WITH flags AS (
    SELECT
        CASE lower(:all) WHEN '' THEN 0 WHEN '0' THEN 0 WHEN 'false' THEN 0 WHEN 'no' THEN 0
            WHEN 'off' THEN 0 WHEN '1' THEN 1 WHEN 'true' THEN 1 WHEN 'yes' THEN 1 WHEN 'on' THEN 1
        END AS include_vacuumed,
        CASE lower(:with_model) WHEN '' THEN 0 WHEN '0' THEN 0 WHEN 'false' THEN 0 WHEN 'no' THEN 0
            WHEN 'off' THEN 0 WHEN '1' THEN 1 WHEN 'true' THEN 1 WHEN 'yes' THEN 1 WHEN 'on' THEN 1
        END AS with_model,
        CASE lower(:with_net) WHEN '' THEN 0 WHEN '0' THEN 0 WHEN 'false' THEN 0 WHEN 'no' THEN 0
            WHEN 'off' THEN 0 WHEN '1' THEN 1 WHEN 'true' THEN 1 WHEN 'yes' THEN 1 WHEN 'on' THEN 1
        END AS with_net,
        CASE lower(:with_tools) WHEN '' THEN 0 WHEN '0' THEN 0 WHEN 'false' THEN 0 WHEN 'no' THEN 0
            WHEN 'off' THEN 0 WHEN '1' THEN 1 WHEN 'true' THEN 1 WHEN 'yes' THEN 1 WHEN 'on' THEN 1
        END AS with_tools,
        CASE
            WHEN :min_cost = '' THEN -1
            WHEN :min_cost NOT GLOB '*[^0-9.]*' AND :min_cost GLOB '*[0-9]*'
                 AND :min_cost NOT GLOB '*.*.*' THEN CAST(:min_cost AS REAL)
        END AS min_cost,
        CASE
            WHEN :n = '' THEN 10
            WHEN :n NOT GLOB '*[^0-9]*' AND length(:n) <= 9 THEN CAST(:n AS INTEGER)
        END AS row_limit
),
picked AS (
    SELECT
        s.*,
        CAST(round((julianday(s.stopped_at) - julianday(s.created_at)) * 86400) AS INTEGER) AS secs
    FROM sessions AS s, flags AS f
    WHERE f.include_vacuumed IS NOT NULL AND f.with_model IS NOT NULL AND f.with_net IS NOT NULL
      AND f.with_tools IS NOT NULL AND f.min_cost IS NOT NULL AND f.row_limit IS NOT NULL
      AND (f.include_vacuumed OR s.status IS NOT 'vacuumed')
      AND (NOT f.with_model
           OR COALESCE(s.total_input_tokens, 0) + COALESCE(s.total_output_tokens, 0) > 0)
      AND (NOT f.with_net OR COALESCE(s.total_requests, 0) > 0)
      AND (NOT f.with_tools OR COALESCE(s.total_tool_calls, 0) > 0)
      AND COALESCE(s.total_estimated_cost, 0) >= f.min_cost
    ORDER BY s.created_at DESC, s.id
    LIMIT (SELECT COALESCE(row_limit, 0) FROM flags)
)
SELECT
    id,
    status,
    strftime('%m-%d %H:%M:%S', created_at) AS created,
    CASE
        WHEN status = 'running' THEN 'running'
        WHEN secs IS NULL OR secs < 0 THEN '?'
        WHEN secs < 60 THEN secs || 's'
        WHEN secs < 3600 THEN (secs / 60) || 'm' || (secs % 60) || 's'
        ELSE (secs / 3600) || 'h' || ((secs % 3600) / 60) || 'm'
    END AS dur,
    printf('$%.2f', COALESCE(total_estimated_cost, 0)) AS cost,
    total_requests AS net,
    COALESCE(total_input_tokens, 0) + COALESCE(total_output_tokens, 0) AS tokens,
    total_tool_calls AS tool,
    total_file_events AS fs,
    created_at,
    stopped_at,
    total_estimated_cost AS cost_usd
FROM picked
ORDER BY created_at DESC, id
