-- One model call by row id.
SELECT id, event_id FROM model_calls WHERE id = :id
