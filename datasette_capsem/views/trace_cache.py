"""The JSON texts of a trace page (tree.json, graph.json, picture.json, conversation.json and
the page's own facts), built once per ledger version and reader policy, in memory and, for a
stopped session, on disk.

A 500-call trace's answers take hundreds of milliseconds to build, mask and serialize, and its
page asks for them right after its HTML. So each text is kept in the trace cache
(`CapsemState.traces`) under a key that names the reader's policy (a masked reader never gets
an unmasked text: the policy is part of every key, in memory and on disk), and a stopped
session's texts are also written to the plugin's cache (`<cache>/<home>/traces/`, the report
store's format and rules: one 0600 file per ledger file and answer, valid while the ledger,
its -wal and main.db row, the rule book, the links and this package's code are unchanged;
files of deleted ledgers pruned; never in the Capsem home), so a restarted server reads them
back instead of building them again.

`mask_text` is a pure function of its text, and the whole-response net
(`core_pages/secrets_guard.py`) remembers the large texts it left unchanged
(`redaction.mask_text_memo`). A text is stored with whether the net left it unchanged, and a
text read back with that mark is remembered again, so the net does not scan it again after a
restart: the same answer, decided by the same code (the code digest is part of the key).

`cached_data` keeps other whole-file answers the same way: the session overview's aggregates
(row counts, the Stats summaries, the page of turns), read raw (plugin pages redact what they
render), so one entry serves every reader; once per ledger version, not once per view.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import json
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from datasette_capsem import redaction
from datasette_capsem.checks.cache import rule_book_version, source_digest
from datasette_capsem.state import get_state
from datasette_capsem.versioned_store import (
    JSON_OBJECT,
    CachedEntry,
    Codec,
    VersionedStore,
    store_key,
)
from datasette_capsem.views import render
from datasette_capsem.views.integrity import validator
from datasette_capsem.views.opening import Opened

log = logging.getLogger(__name__)

# What a stored text is built by: the graph, tree and conversation code, the masker and how a
# page's data becomes JSON. Changing any of them makes every stored text stale.
CODE_PARTS = (
    "graph",
    "redaction.py",
    "streams.py",
    "views/trace.py",
    "views/trace_cache.py",
    "views/render.py",
    "urls.py",
)


def _decode_text(data: Any) -> dict[str, Any]:
    if not (isinstance(data, dict) and isinstance(data.get("text"), str)):
        raise ValueError("a stored trace text is not an object with its text")
    return {"text": data["text"], "net_clean": data.get("net_clean") is True}


TEXT_JSON = Codec(encode=lambda entry: entry, decode=_decode_text)


def code_version() -> str:
    """A digest of the code that builds a trace's texts (CODE_PARTS of this package)."""
    return source_digest(CODE_PARTS, (".py", ".sql")).hex()


def trace_store(datasette) -> VersionedStore:
    """The trace store of this Datasette instance (state.py builds it)."""
    return get_state(datasette).trace_store


def _net_clean(text: str) -> bool:
    """Whether the whole-response net leaves `text` unchanged (remembered by the net's memo,
    so the answer it is sent as is not scanned again)."""
    return redaction.mask_text_memo(text) == text


async def json_text(
    datasette,
    opened: Opened,
    answer: str,
    build: Callable[[], Awaitable[Any]],
    masks: dict[str, str] | None = None,
) -> str:
    """The JSON text of `await build()` for the current reader (redacted as its policy
    requires), built once per ledger version, answer and policy. `answer` names what is built
    (the suffix and its parameters, with the trace and exchange); `masks`, the masked texts
    shared with the other answers of the same data (redaction.redact_tree)."""
    policy, hide = redaction.policy.get(), redaction.hide_free_text.get()
    version = f"{code_version()}:{rule_book_version()}"
    # The links the texts carry (base_url, database name) and what the text is, policy first.
    profile = f"{policy}|{hide}|{answer}|{opened.links.session()}"
    stored = store_key(opened.session, _ledger_path(opened), profile, TEXT_JSON)
    key = (opened.session.id, profile, version)
    check = validator(opened)
    store = trace_store(datasette)

    async def compute() -> str:
        if stored is not None:
            found = await asyncio.to_thread(store.load, stored, check, version)
            if found is not None:
                if found.report["net_clean"]:
                    redaction.remember_unchanged(found.report["text"])
                return found.report["text"]
        started = time.time()
        data = await build()
        # Redacting and encoding a big trace takes a while: off the event loop, with the
        # request's policy (a copied context).
        context = contextvars.copy_context()
        text = await asyncio.to_thread(context.run, render.json_text, data, masks)
        if stored is not None:
            clean = policy != redaction.OPEN and await asyncio.to_thread(_net_clean, text)
            entry = {"text": text, "net_clean": clean}
            saved = CachedEntry(check, started, entry, timeless=True)
            loop = asyncio.get_running_loop()
            loop.run_in_executor(None, store.save, stored, saved, version)
            store.prune_now_and_then()
        return text

    entry, _ = await get_state(datasette).traces.get(key, check, compute)
    return entry.report


def _ledger_path(opened: Opened) -> Path | None:
    return opened.db.source_path if opened.db is not None else opened.session.ledger_path


# What a stored page answer (`cached_data`) is built by: the session pages' reads and the
# ledger SQL they run.
DATA_CODE_PARTS = ("session", "graph", "ledger", "views/session.py", "views/trace_cache.py")


def _as_json(data: dict[str, Any]) -> dict[str, Any]:
    """`data` as it reads back from the store (tuples as lists), so a page built from a fresh
    answer and one built from a stored answer are the same page; unchanged when not JSON."""
    try:
        return json.loads(json.dumps(data))
    except (TypeError, ValueError):
        return data


def _data_key(opened: Opened, answer: str) -> tuple[str, str, tuple]:
    version = f"{source_digest(DATA_CODE_PARTS, ('.py', '.sql')).hex()}:{rule_book_version()}"
    profile = f"data|{answer}|{opened.links.session()}"
    return version, profile, (opened.session.id, profile, version)


def data_held(datasette, opened: Opened, answer: str) -> bool:
    """Whether `cached_data`'s answer is in memory for the file as it is now."""
    key = _data_key(opened, answer)[2]
    return get_state(datasette).pages.fresh(key, validator(opened)) is not None


async def cached_data(
    datasette,
    opened: Opened,
    answer: str,
    build: Callable[[], Awaitable[dict[str, Any]]],
    *,
    persist: bool = True,
) -> dict[str, Any]:
    """`await build()` (a JSON object of raw ledger values: the caller's page redacts what it
    renders), built once per ledger version and `answer`, kept in memory
    (`CapsemState.pages`) and, for a stopped session, in the trace store, so a restart reads
    it back. An answer of a reader's free choosing (`persist=False`: any time range, any id)
    is kept in memory only: a file each would let requests fill the disk until the ledger
    changes. Each call gets its own copy, which the caller may change."""
    version, profile, key = _data_key(opened, answer)
    stored = (
        store_key(opened.session, _ledger_path(opened), profile, JSON_OBJECT) if persist else None
    )
    check = validator(opened)
    store = trace_store(datasette)

    async def compute() -> dict[str, Any]:
        if stored is not None:
            found = await asyncio.to_thread(store.load, stored, check, version)
            if found is not None:
                return found.report
        started = time.time()
        data = _as_json(await build())
        if stored is not None:
            saved = CachedEntry(check, started, data, timeless=True)
            asyncio.get_running_loop().run_in_executor(None, store.save, stored, saved, version)
            store.prune_now_and_then()
        return data

    entry, _ = await get_state(datasette).pages.get(key, check, compute)
    return copy.deepcopy(entry.report)
