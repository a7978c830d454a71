"""The one verdict on a body blob's hash, shared by the integrity checks and the pages.

The check engine registers `hash_verdict` as the SQL function `capsem_body_hash_ok`
(checks/sql/blob_hash_mismatch.sql) and the trace graph and event pages call it directly
(graph/bodies.py), so a blob is never "fine" on one screen and "mismatch" on another.

What `body_hash` covers: `blake3:` + 64 hex of the bytes stored in `body` (spec §4.2 gives the
format; the generator, our model of the writer, hashes the stored bytes for every blob, the
10 MiB-capped ones with `truncated=1` included). So `truncated` does not change the verdict: a
capped blob whose hash names bytes the ledger does not hold cannot be verified, and a blob
that cannot be verified against its own hash is not the ledger (spec §6.1). Hex digits are
compared without regard to case; the `blake3:` prefix must be exact.
"""

from __future__ import annotations

from typing import Any

import blake3

PREFIX = "blake3:"


def blake3_ref(data: bytes) -> str:
    """`blake3:<64 lowercase hex>` of `data`."""
    return PREFIX + blake3.blake3(data).hexdigest()


def stored_bytes(data: Any) -> bytes:
    """The bytes of a `body` cell: NULL is no bytes; TEXT is its UTF-8 (read it with
    CAST(body AS BLOB) to get the file's own bytes); any other value its text form."""
    if data is None:
        return b""
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    if not isinstance(data, str):
        data = str(data)
    try:
        return data.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return data.encode("utf-8", "surrogatepass")


def hash_verdict(data: Any, expected: Any) -> bool:
    """Does `expected` (a `body_hash` cell) name the blake3 of the stored bytes `data`?"""
    if not isinstance(expected, str) or not expected.startswith(PREFIX):
        return False
    return blake3_ref(stored_bytes(data)) == PREFIX + expected[len(PREFIX) :].lower()
