"""Pages of a big ledger whose answer is not ready: they answer at once and say so.

A page whose answer reads the whole file (the check page's full report, a trace page's rule
book verdicts on a cold store) is computed once per file version and kept (checks/cache.py,
views/trace_cache.py). On a big ledger (views/integrity.big_ledger) whose answer is neither held
nor stored, that run takes seconds: the page waits `WAIT_SECONDS` for it, then answers 202
with a page that says what is being computed and reloads itself, while the run goes on in the
background for every view that asks meanwhile. A smaller ledger's page waits for its answer,
as before.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import Any

from datasette_capsem import errors
from datasette_capsem.views import render
from datasette_capsem.views.integrity import big_ledger, ledger_path
from datasette_capsem.views.opening import Opened

log = logging.getLogger(__name__)

WAIT_SECONDS = 0.5
RELOAD_SECONDS = 2
_PENDING = object()


def _consume(task: asyncio.Future) -> None:
    """A background run that failed after its page answered: logged, not lost (but for what a
    page says itself on its next view: an unknown trace, a bad parameter)."""
    if task.cancelled() or task.exception() is None:
        return
    if not isinstance(task.exception(), errors.CapsemError):
        log.warning("a background page answer failed", exc_info=task.exception())


async def within_wait(opened: Opened, answer: Awaitable[Any], held: bool = False) -> Any:
    """`await answer`, or what `pending` recognises when the ledger is big and the answer is
    not ready within `WAIT_SECONDS` (it is then finished in the background). `held`: what the
    answer waits on is in memory already (it is awaited then, however big the ledger)."""
    task = asyncio.ensure_future(answer)
    task.add_done_callback(_consume)
    if not held and big_ledger(opened):
        try:
            await asyncio.wait_for(asyncio.shield(task), WAIT_SECONDS)
        except asyncio.TimeoutError:
            return _PENDING
    return await task


def in_background(answer: Awaitable[Any]) -> None:
    """Start `answer` now for a later view (its result is kept where it keeps it)."""
    asyncio.ensure_future(answer).add_done_callback(_consume)


def pending(value: Any) -> bool:
    return value is _PENDING


async def page(datasette, request, opened: Opened, what: str, title: str, **data: Any):
    """The 202 answer of a page whose answer is being computed: `what` says what is."""
    session = opened.session
    size = ledger_path(opened).stat().st_size / 2**20
    answer = {
        "checking": True,
        "session": session.summary(),
        "message": f"{what} (the ledger of session {session.id} is {size:,.0f} MiB). It "
        "appears here when it is done, and is kept until the file changes.",
        "reload_seconds": RELOAD_SECONDS,
        **data,
    }
    context = {
        **answer,
        "title": title,
        "session_href": opened.links.session(),
        "display_name": session.display_name,
    }
    return await render.page(datasette, request, "pending.html", context, data=answer, status=202)
