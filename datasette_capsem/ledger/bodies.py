"""The one verdict on a body blob's hash, shared by the integrity checks and the pages.

The check engine registers `hash_verdict` as the SQL function `capsem_body_hash_verdict`
(checks/sql/blob_hash_mismatch.sql) and the trace graph, event and body pages call it directly
(graph/bodies.py), so a blob is never "fine" on one screen and "mismatch" on another.

What `body_hash` covers: `blake3:` + 64 hex of the ORIGINAL captured bytes, not of the stored
ones (spec §4.4; Capsem's writer.rs hashes `bytes` and stores `bytes[..stored_len]`). So a blob
with `truncated=0` verifies as blake3(body) == body_hash, and a blob with `truncated=1` (the
10 MiB cap; an upload inflated by lossy UTF-8 decoding) cannot be verified from the ledger:
its hash covers `original_bytes`, of which only `stored_bytes` are kept. That is not a
mismatch. Hex digits are compared without regard to case; the `blake3:` prefix must be exact.
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


VERIFIED, MISMATCH, UNVERIFIABLE = "verified", "mismatch", "unverifiable"


def hash_verdict(data: Any, expected: Any, truncated: Any) -> str:
    """VERIFIED, MISMATCH or UNVERIFIABLE: does `expected` (a `body_hash` cell) name the
    blake3 of the stored bytes `data`, for a blob whose `truncated` flag is given?"""
    if truncated not in (0, None, False):
        return UNVERIFIABLE
    if not isinstance(expected, str) or not expected.startswith(PREFIX):
        return MISMATCH
    matches = blake3_ref(stored_bytes(data)) == PREFIX + expected[len(PREFIX) :].lower()
    return VERIFIED if matches else MISMATCH


def hash_note(verdict: str | None, original_bytes: Any) -> str:
    """What a verdict means, in the words every page uses."""
    if verdict == VERIFIED:
        return "blake3 matches"
    if verdict == MISMATCH:
        return "blake3 does not match the stored bytes"
    if verdict == UNVERIFIABLE:
        return f"unverifiable (the hash covers all {original_bytes} original bytes)"
    return "checked when loaded"
