-- The searchable text of one ledger table, one row per ledger row: its identity, time,
-- provider and model where it has them, and its text columns (text0..textN). The columns
-- come from fixed tuples in index/text.py; one the file lacks reads as NULL. index/text.py
-- reads the columns by position: keep their order.
SELECT id AS row_id,
       {event_id} AS event_id,
       {trace_id} AS trace_id,
       {model_call_id} AS model_call_id,
       {provider} AS provider,
       {model} AS model,
       {at} AS at,
       {texts}
FROM {table}
WHERE {own}
