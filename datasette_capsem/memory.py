"""Process memory hygiene for a long-running server that opens many SQLite files.

glibc gives each thread that allocates its own malloc arena and keeps freed memory in them;
with Datasette's SQL thread pool, the index thread and a connection per mounted ledger, RSS
settles well above what is live. Both calls are no-ops where glibc is not the allocator.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os

M_ARENA_MAX = -8  # mallopt parameter number, from glibc's malloc.h
ARENAS = 2


def _libc():
    with contextlib.suppress(OSError):
        return ctypes.CDLL("libc.so.6")
    return None


def limit_malloc_arenas() -> None:
    """Cap glibc's per-thread arenas, unless the operator chose with MALLOC_ARENA_MAX."""
    libc = _libc()
    if libc is not None and "MALLOC_ARENA_MAX" not in os.environ:
        with contextlib.suppress(AttributeError):
            libc.mallopt(M_ARENA_MAX, ARENAS)


def release_memory() -> None:
    """Hand freed memory back to the OS after a large one-off job (an index refresh)."""
    gc.collect()
    libc = _libc()
    if libc is not None:
        with contextlib.suppress(AttributeError):
            libc.malloc_trim(0)
