-- The searchable text of one ledger table, one row per ledger row: its identity, time,
-- provider and model where it has them, and its text columns (text0..textN). The columns
-- come from fixed tuples in index/text.py ({texts}); one the file lacks reads as NULL. index/text.py
-- reads the columns by position: keep their order.
SELECT id AS row_id,
       {opt:event_id} AS event_id,
       {opt:trace_id} AS trace_id,
       {opt:model_call_id} AS model_call_id,
       {opt:provider} AS provider,
       {opt:model} AS model,
       {at} AS at,
       {texts}
FROM {table}
WHERE {own}
