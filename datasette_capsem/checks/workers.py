"""Worker processes for the long jobs over every ledger: `check --all` and the index build.

Threads do not help there: the Python around each statement (building findings, reading rows,
masking text) holds the GIL as long as SQLite works, so two threads ran slower than one on two
cores. `ordered_map` runs a function over many items in worker processes and yields the
results in the items' order, so what a caller prints or writes is the same whatever the
number of workers.

The workers are forked when this process runs no other thread (the CLI: nothing to copy but
what is already imported), else spawned (a server: forking while another thread holds a lock,
SQLite's included, could leave the child waiting on it forever). Ctrl-C reaches the whole
process group: workers ignore it, and the caller's KeyboardInterrupt ends them. A worker that
dies raises `WorkerFailed`; an exception raised by `function` is raised again in the caller.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc
import multiprocessing
import os
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from typing import TypeVar

R = TypeVar("R")
MAX_WORKERS = 4
PR_SET_PDEATHSIG = 1  # prctl option, from linux/prctl.h


class WorkerFailed(ChildProcessError):
    """A worker process ended without finishing its items (killed, out of memory). An
    OSError, as a failed child process is: a server's index refresh records it and retries."""


def default_workers() -> int:
    """One worker per core, at most MAX_WORKERS."""
    return max(1, min(os.cpu_count() or 1, MAX_WORKERS))


def _start_method() -> str:
    if threading.active_count() == 1 and "fork" in multiprocessing.get_all_start_methods():
        return "fork"
    return "spawn"


def _worker_started(parent: int) -> None:
    """Ctrl-C goes to the whole process group: the parent alone handles it (and ends the
    workers), so no worker prints a traceback of its own. A parent that dies without ending
    them (a server stopped by SIGTERM or SIGKILL) takes them along: a worker waiting on its
    task queue holds that queue's other end itself and would never see it close, living on
    and keeping the server's stdout and stderr open."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # it died before the line above
        os._exit(1)


@contextmanager
def _interrupts_held() -> Iterator[None]:
    """Hold Ctrl-C while workers start: one arriving during a fork is swallowed by an at-fork
    handler (logging's), and the run would go on. It is delivered when the block ends."""
    main = threading.current_thread() is threading.main_thread()
    if not main or not hasattr(signal, "pthread_sigmask"):
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


@contextmanager
def _objects_frozen(method: str) -> Iterator[None]:
    """Fork the workers with the parent's objects out of the collector's reach (`gc.freeze`):
    a forked child's collections would otherwise write to every container object it
    inherited, copying each memory page they sit on (the catalog and index of 10,000
    sessions) for nothing. The parent collects them again once the workers have started.
    Spawned workers inherit no object: nothing to do, and a server's own frozen heap
    (memory.settle_heap) must not be unfrozen by a refresh."""
    if method != "fork":
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _run_chunk(function: Callable[..., R], chunk: Sequence[tuple]) -> list[R]:
    return [function(*args) for args in chunk]


def _stop(pool: ProcessPoolExecutor) -> None:
    """Cancel what is queued and end the workers now (after Ctrl-C or an error): waiting for
    a busy worker could take as long as its biggest ledger."""
    pool.shutdown(wait=False, cancel_futures=True)
    # The executor has no public way to end running workers before Python 3.14.
    processes = list((pool._processes or {}).values())  # noqa: SLF001
    for process in processes:
        process.terminate()
    for process in processes:
        process.join(timeout=5)


def ordered_map(
    function: Callable[..., R], items: Sequence[tuple], workers: int, chunk: int = 16
) -> Iterator[R]:
    """`function(*item)` for every item, in order, on `workers` processes (`function` and the
    items must pickle: a module-level function or a `functools.partial` of one)."""
    chunks = [items[start : start + chunk] for start in range(0, len(items), chunk)]
    if not chunks:
        return
    method = _start_method()
    pool = ProcessPoolExecutor(
        max_workers=max(1, min(workers, len(chunks))),
        mp_context=multiprocessing.get_context(method),
        initializer=_worker_started,
        initargs=(os.getpid(),),
    )
    finished = False
    try:
        with _interrupts_held(), _objects_frozen(method):  # every worker starts in map()
            results = pool.map(_run_chunk, [function] * len(chunks), chunks)
        for done in results:
            yield from done
        finished = True
    except BrokenProcessPool as error:
        raise WorkerFailed(f"a worker process ended unexpectedly ({error})") from error
    finally:
        if finished:
            pool.shutdown(wait=True)
        else:
            _stop(pool)
