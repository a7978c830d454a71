"""Ledgers left mid-write: committed frames in ``-wal`` that were never checkpointed.

SQLite checkpoints and deletes the WAL when the last connection closes, so the files are copied
while a connection still holds them (the state a killed or still-running writer leaves). SQLite
also draws the WAL salts at random; ``normalize_wal`` replaces them with values derived from the
file and recomputes every checksum, in the WAL and in the ``-shm`` index header, so the same seed
still gives byte-identical files.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import struct
import sys
from pathlib import Path

import blake3

from datasette_capsem.generate.rows import Ledger, insert_rows

WAL_HEADER = 32
FRAME_HEADER = 24
SHM_HEADER = 48


def append_uncheckpointed(path: Path, era: str, tail: Ledger) -> None:
    """Insert ``tail`` into ``path`` so its rows exist only in ``path``-wal, with -shm beside it."""
    conn = sqlite3.connect(path, isolation_level=None)
    staged = path.with_name(path.name + ".staged")
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA wal_autocheckpoint=0")
        conn.execute("BEGIN")
        insert_rows(conn, era, tail)
        conn.execute("COMMIT")
        for suffix in ("", "-wal", "-shm"):
            shutil.copyfile(f"{path}{suffix}", f"{staged}{suffix}")
    finally:
        conn.close()
    for suffix in ("", "-wal", "-shm"):
        os.replace(f"{staged}{suffix}", f"{path}{suffix}")
    normalize_wal(path)


def _checksum(data: bytes, s0: int, s1: int, big_endian: bool) -> tuple[int, int]:
    """SQLite's WAL checksum over 32-bit words in the given byte order."""
    words = struct.unpack(f"{'>' if big_endian else '<'}{len(data) // 4}I", data)
    for i in range(0, len(words), 2):
        s0 = (s0 + words[i] + s1) & 0xFFFFFFFF
        s1 = (s1 + words[i + 1] + s0) & 0xFFFFFFFF
    return s0, s1


def normalize_wal(path: Path) -> None:
    """Give ``path``-wal deterministic salts, and fix the checksums that depend on them."""
    wal_path = Path(f"{path}-wal")
    wal = bytearray(wal_path.read_bytes())
    if len(wal) < WAL_HEADER:
        return
    magic, _version, page_size = struct.unpack(">III", wal[:12])
    big = magic & 1 == 1
    salts = blake3.blake3(bytes(path.read_bytes()[:4096])).digest()[:8]
    wal[16:24] = salts
    cksum = _checksum(bytes(wal[:24]), 0, 0, big)
    wal[24:32] = struct.pack(">II", *cksum)
    offset = WAL_HEADER
    while offset + FRAME_HEADER + page_size <= len(wal):
        wal[offset + 8 : offset + 16] = salts
        cksum = _checksum(bytes(wal[offset : offset + 8]), *cksum, big)
        cksum = _checksum(
            bytes(wal[offset + FRAME_HEADER : offset + FRAME_HEADER + page_size]), *cksum, big
        )
        wal[offset + 16 : offset + 24] = struct.pack(">II", *cksum)
        offset += FRAME_HEADER + page_size
    wal_path.write_bytes(bytes(wal))
    _fix_shm(Path(f"{path}-shm"), salts, cksum)


def _fix_shm(shm_path: Path, salts: bytes, frame_cksum: tuple[int, int]) -> None:
    """Rewrite the two copies of the wal-index header (native byte order) to match the WAL."""
    if not shm_path.exists():
        return
    shm = bytearray(shm_path.read_bytes())
    if len(shm) < 2 * SHM_HEADER:
        return
    order = "<" if sys.byteorder == "little" else ">"
    header = bytearray(shm[:SHM_HEADER])
    header[24:32] = struct.pack(f"{order}II", *frame_cksum)
    header[32:40] = salts
    header[40:48] = struct.pack(f"{order}II", *_checksum(bytes(header[:40]), 0, 0, order == ">"))
    shm[0:SHM_HEADER] = header
    shm[SHM_HEADER : 2 * SHM_HEADER] = header
    shm_path.write_bytes(bytes(shm))
