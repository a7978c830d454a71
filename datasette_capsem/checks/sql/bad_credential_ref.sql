-- credential_refs that are not credential:blake3:<64 lowercase hex> (spec §6.2 #20).
SELECT id
FROM {table}
WHERE credential_ref IS NOT NULL
  AND NOT (
      typeof(credential_ref) = 'text'
      AND length(credential_ref) = 82
      AND substr(credential_ref, 1, 18) = 'credential:blake3:'
      AND substr(credential_ref, 19) NOT GLOB '*[^0-9a-f]*'
  )
ORDER BY id
