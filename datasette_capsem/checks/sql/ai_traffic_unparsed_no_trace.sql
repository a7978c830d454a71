-- AI provider requests in a file with no model calls at all (check_session.py's rule).
SELECT id
FROM net_events
WHERE decision = 'allowed'
  AND (domain LIKE '%.anthropic.com' OR domain LIKE '%.openai.com'
       OR domain LIKE '%.googleapis.com')
  AND NOT EXISTS (SELECT 1 FROM model_calls)
ORDER BY id
