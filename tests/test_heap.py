"""The server's long-lived heap is frozen out of Python's cyclic collector after an index
refresh (memory.settle_heap), so full collections stop walking 10,000 sessions' objects; what
a freeze keeps from the collector is collected again by the next settle."""

from __future__ import annotations

import gc
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
