-- Model API requests in a file with no model calls at all (check_session.py's rule, limited
-- to the endpoints Capsem parses).
SELECT id
FROM net_events
WHERE decision = 'allowed'
  AND /* include: llm_api_request */
  AND NOT EXISTS (SELECT 1 FROM model_calls)
ORDER BY id
