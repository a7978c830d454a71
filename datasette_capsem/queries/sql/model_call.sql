-- One model call and everything hanging off it, in the order the exchange happened.
SELECT role, table_name, row_id, time, call_id, detail
FROM (
    {parts}
)
ORDER BY role_rank, row_id
