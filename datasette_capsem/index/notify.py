"""Wake the index's watch as soon as a watched directory changes (Linux inotify).

The watch itself stays the round of stats in `service.py`: this only tells it *when* to look,
so a write is seen at once rather than after the watch's pause (0.25-0.5 s). Nothing depends
on an event arriving: where inotify is missing (not Linux, no watches left) or silent (a
network filesystem, where a remote machine's writes raise no event), the rounds of stats keep
running at their own pace and find every change as before.

Only directories are watched (the homes' layout dirs and each session's dir), for writes,
creations, renames and deletions in them; reads raise no event, so serving pages does not wake
the watch, and the plugin's own files live in its cache, outside every home.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import select
import struct
import time
from collections.abc import Iterable
from pathlib import Path

IN_MODIFY = 0x00000002
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
EVENTS = (
    IN_MODIFY
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
    | IN_ONLYDIR
)
_HEADER = struct.Struct("iIII")  # wd, mask, cookie, len (struct inotify_event)


def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.inotify_init1  # noqa: B018 (present only on Linux)
    except (OSError, AttributeError):
        return None
    return libc


class DirectoryNotifier:
    """A set of watched directories and a `wait` that returns early when one changed."""

    def __init__(self) -> None:
        self._libc = _libc()
        self._fd: int | None = None
        # watched directory -> its watch descriptor (30,000 at 100,000 sessions: no map
        # back from descriptors is kept, a dropped watch is looked for when dropped)
        self._wds: dict[Path, int] = {}
        if self._libc is not None:
            fd = self._libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
            self._fd = fd if fd >= 0 else None
        # `wake` writes here: a waiting thread returns at once (to stop, say).
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)

    @property
    def active(self) -> bool:
        """Whether events can arrive at all (else `wait` is a plain sleep)."""
        return self._fd is not None

    @property
    def watched(self) -> frozenset[Path]:
        return frozenset(self._wds)

    @property
    def watching(self) -> bool:
        """Whether any directory is watched (`watched` without a copy of 30,000 names)."""
        return bool(self._wds)

    def watch(self, directories: Iterable[Path]) -> int:
        """Watch exactly these directories (those that exist and can be watched); how many
        were added (a change in one before now raised no event: look again by stat)."""
        if self._fd is None:
            return 0
        added = 0
        wanted = set(directories)
        for path in [path for path in self._wds if path not in wanted]:
            wd = self._wds.pop(path)
            self._libc.inotify_rm_watch(self._fd, wd)  # type: ignore[union-attr]
        for path in wanted - self._wds.keys():
            wd = self._libc.inotify_add_watch(self._fd, os.fsencode(path), EVENTS)  # type: ignore[union-attr]
            if wd >= 0:  # a dir that is gone, or no watches left: the stat rounds see it
                self._wds[path] = wd
                added += 1
        return added

    def wait(self, timeout: float) -> bool:
        """Sleep up to `timeout` seconds; True as soon as a watched directory changed."""
        deadline = time.monotonic() + timeout
        watched = [self._wake_read] + ([self._fd] if self._fd is not None else [])
        while True:
            readable, _, _ = select.select(watched, [], [], max(0.0, deadline - time.monotonic()))
            if not readable:
                return False
            if self._wake_read in readable:
                with contextlib.suppress(BlockingIOError):
                    os.read(self._wake_read, 64)
                return False
            if self._drain():
                return True

    def wake(self) -> None:
        """End a `wait` in another thread now."""
        if self._wake_write >= 0:
            with contextlib.suppress(OSError):
                os.write(self._wake_write, b"x")

    def _drain(self) -> bool:
        """Read every queued event; forget watches the kernel dropped. Whether any event
        was a change (not only the kernel confirming a watch this object removed)."""
        changed = False
        dropped: set[int] = set()
        while True:
            try:
                data = os.read(self._fd, 64 * 1024)  # type: ignore[arg-type]
            except BlockingIOError:
                break
            offset = 0
            while offset + _HEADER.size <= len(data):
                wd, mask, _cookie, length = _HEADER.unpack_from(data, offset)
                offset += _HEADER.size + length
                if mask & IN_IGNORED:
                    dropped.add(wd)
                changed = changed or bool(mask & ~IN_IGNORED)
        if dropped:  # the kernel dropped these watches (their dirs are gone)
            for path in [path for path, wd in self._wds.items() if wd in dropped]:
                del self._wds[path]
        return changed

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        # -1 after closing: a closed descriptor's number is soon another file's.
        write, self._wake_write = self._wake_write, -1
        for fd in (self._wake_read, write):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._wds.clear()
