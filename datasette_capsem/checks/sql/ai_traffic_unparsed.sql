-- AI provider requests with no parsed model call (spec §6.2 #13): every allowed AI request
-- when model_calls is empty, else AI POSTs whose trace has no model call. The net row of a
-- model exchange carries the model call's trace_id (spec §4.4).
SELECT id
FROM net_events
WHERE decision = 'allowed'
  AND (domain LIKE '%.anthropic.com' OR domain LIKE '%.openai.com'
       OR domain LIKE '%.googleapis.com')
  AND (
      NOT EXISTS (SELECT 1 FROM model_calls)
      OR (method = 'POST'
          AND COALESCE(trace_id, '') NOT IN (
              SELECT trace_id FROM model_calls WHERE trace_id IS NOT NULL
          ))
  )
ORDER BY id
