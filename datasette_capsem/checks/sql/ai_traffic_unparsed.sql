-- Model API requests with no parsed model call (spec §6.2 #13): every allowed one when
-- model_calls is empty, else POSTs whose trace has no model call. The net row of a model
-- exchange carries the model call's trace_id (spec §4.4).
SELECT id
FROM net_events
WHERE decision = 'allowed'
  AND /* include: llm_api_request */
  AND (
      NOT EXISTS (SELECT 1 FROM model_calls)
      OR (method = 'POST'
          AND COALESCE(trace_id, '') NOT IN (
              SELECT trace_id FROM model_calls WHERE trace_id IS NOT NULL
          ))
  )
ORDER BY id
