"""The server's long-lived heap is frozen out of Python's cyclic collector after an index
refresh (memory.settle_heap), so full collections stop walking 10,000 sessions' objects; what
a freeze keeps from the collector is collected again by the next settle. glibc's thresholds
stay where they start (memory.limit_malloc_arenas), so a freed block of a megabyte goes back
to the OS."""

from __future__ import annotations

import ctypes.util
import gc
import os
import subprocess
import sys
import time
import weakref

import pytest

from datasette_capsem import memory
from datasette_capsem.state import get_state
from tests.helpers import make_datasette


class Node:
    pass


def test_a_cycle_frozen_by_one_settle_is_collected_by_the_next():
    node = Node()
    node.me = node  # a reference cycle: only the cyclic collector frees it
    alive = weakref.ref(node)
    memory.settle_heap()
    assert gc.get_freeze_count() > 0
    del node
    gc.collect()
    assert alive() is not None  # frozen: an ordinary collection does not look at it
    memory.settle_heap()
    assert alive() is None


@pytest.mark.asyncio(loop_scope="session")
async def test_an_index_refresh_settles_the_heap(capsem_home, tmp_path, monkeypatch):
    """The plugin's after-refresh hook settles the heap (the first refresh of a process,
    then at most every SETTLE_SECONDS)."""
    datasette = await make_datasette(capsem_home, tmp_path / "cache")
    service = get_state(datasette).index
    assert memory.settle_heap_now_and_then in service.after_refresh
    # Unfrozen right before this instance's refresh: another instance of the same worker
    # refreshing in its own thread may settle the heap at any other moment.
    monkeypatch.setattr(memory, "_last_settled", [float("-inf")])
    gc.unfreeze()
    service.refresh()
    assert gc.get_freeze_count() > 0


def test_release_memory_collects_new_garbage_and_walks_the_frozen_heap_only_now_and_then(
    monkeypatch,
):
    """After a big refresh the job's garbage is young: release_memory collects what was made
    since the last freeze, and unfreezes the whole heap only when no full settle ran for
    SETTLE_SECONDS (a full walk of a big process costs hundreds of ms)."""
    monkeypatch.setattr(memory, "_last_settled", [time.monotonic()])  # a full settle just ran
    old = Node()
    old.me = old
    old_alive = weakref.ref(old)
    gc.freeze()
    del old  # a cycle frozen while alive, garbage now
    young = Node()
    young.me = young
    young_alive = weakref.ref(young)
    del young
    memory.release_memory()
    assert young_alive() is None
    assert old_alive() is not None  # the frozen heap was not walked
    monkeypatch.setattr(memory, "_last_settled", [time.monotonic() - memory.SETTLE_SECONDS])
    memory.release_memory()  # a full settle is due
    assert old_alive() is None


# A process that frees a 16 MB block (glibc raises its mmap threshold to 16 MB and its trim
# threshold to 32 MB), then makes 48 blocks of 1 MB and frees all but the last: the RSS the
# 47 freed ones leave (MB). `limited`: memory.limit_malloc_arenas() first, as the server does.
_FREED_BLOCKS = """
import sys
from datasette_capsem import memory

def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024

if sys.argv[1] == "limited":
    memory.limit_malloc_arenas()
big = b"x" * (16 << 20)
del big
before = rss()
blocks = [b"x" * (1 << 20) for _ in range(48)]
last = blocks[-1]
del blocks
print(rss() - before)
"""


def _rss_left_by_freed_blocks(how: str) -> float:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"
    }
    done = subprocess.run(
        [sys.executable, "-c", _FREED_BLOCKS, how], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return float(done.stdout)


def test_freed_megabyte_blocks_go_back_to_the_os_after_a_big_one_was_freed():
    """Without the pinned thresholds the 47 freed megabytes stay resident (the case the test
    exists for); with them each block was its own mapping, unmapped when freed."""
    if not sys.platform.startswith("linux") or ctypes.util.find_library("c") != "libc.so.6":
        pytest.skip("glibc's malloc only")
    assert _rss_left_by_freed_blocks("default") > 40
    assert _rss_left_by_freed_blocks("limited") < 8
