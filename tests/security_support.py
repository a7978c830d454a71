"""Shared by the security and serving tests: every route of the plugin and of Datasette, with
real ids of one session filled in, and a real server started as a subprocess."""

from __future__ import annotations

import itertools
import re
import socket
import subprocess
import time
from pathlib import Path
from urllib.parse import quote

import httpx

from datasette_capsem.readonly import open_readonly
from datasette_capsem.views.routes import ROUTES
from tests.helpers import session_in

ROOT = Path(__file__).resolve().parent.parent
GROUP = re.compile(r"\((?:\?P<(\w+)>)?((?:[^()\\]|\\.)*)\)(\?)?")


def _literal(fragment: str) -> str:
    return fragment.replace("\\.", ".").replace("\\", "")


def _expand(pattern: str, values: dict[str, str]) -> list[str] | None:
    """Every concrete path a route pattern matches with `values` in its named id groups:
    alternatives of optional groups (formats, suffixes) each give one path."""
    body = pattern.strip("^$").replace("/?", "")
    pieces: list[list[str]] = []
    position = 0
    for match in GROUP.finditer(body):
        pieces.append([_literal(body[position : match.start()])])
        name, inner, optional = match.groups()
        if inner.startswith("[") or inner.startswith("\\d"):  # an id: filled from `values`
            if name not in values:
                return None
            pieces.append([quote(values[name], safe="")])
        else:
            choices = [_literal(choice) for choice in inner.split("|")]
            pieces.append(([""] if optional else []) + choices)
        position = match.end()
    pieces.append([_literal(body[position:])])
    return ["".join(combo) for combo in itertools.product(*pieces)]


def session_ids(home: Path, manifest: dict, cache: Path) -> dict[str, str]:
    """Ids of one clean current-era session with traces: session, trace, event, blob, row."""
    session = session_in(manifest, era="head", has=("clean", "traces"), lacks=("live",))
    conn = open_readonly(home / session["ledger"], cache)
    try:
        event_id, blob_id = conn.execute(
            "SELECT event_id, id FROM event_body_blobs ORDER BY id LIMIT 1"
        ).fetchone()
        row_id = conn.execute("SELECT id FROM model_calls ORDER BY id LIMIT 1").fetchone()[0]
        call_id = conn.execute("SELECT call_id FROM tool_calls ORDER BY id LIMIT 1").fetchone()[0]
    finally:
        conn.close()
    return {
        "session_id": session["id"],
        "trace_id": session["traces"][0],
        "event_id": event_id,
        "blob_id": str(blob_id),
        "row_id": str(row_id),
        "table": "model_calls",
        "call_id": call_id,
    }


def plugin_routes(ids: dict[str, str]) -> list[str]:
    """Every plugin route, once per format, with real ids."""
    found: list[str] = []
    for pattern, _handler in ROUTES:
        for path in _expand(pattern, ids) or []:
            if path.endswith("/node.json"):  # one row of the trace, named by `id`
                path += f"?id=model_calls:{ids['row_id']}"
            if path.startswith("/-/capsem/compare"):  # two turns, each SESSION:TRACE
                turn = quote(f"{ids['session_id']}:{ids['trace_id']}")
                path += f"?a={turn}&b={turn}"
            if path not in found:
                found.append(path)
    extra = [
        f"/-/capsem/resolve?name={quote(ids['session_id'])}",
        f"/-/capsem/search?q={quote(ids['trace_id'])}",
        f"/-/capsem/search.json?q={quote(ids['event_id'])}",
    ]
    return found + extra


def core_routes(ids: dict[str, str]) -> list[str]:
    """Datasette's own pages: instance, databases, tables, rows, canned queries, errors."""
    db = "/" + quote(ids["session_id"], safe="")
    return [
        "/-/metadata",
        "/-/metadata.json",
        "/-/databases.json",
        "/-/versions.json",
        "/-/plugins.json",
        "/-/settings.json",
        "/-/actor.json",
        "/main",
        "/main.json",
        "/main/sessions",
        "/main/sessions.json?_shape=array",
        "/main/sessions.csv",
        db,
        f"{db}.json",
        f"{db}/model_calls",
        f"{db}/model_calls.json?_shape=objects",
        f"{db}/model_calls.csv",
        f"{db}/net_events",
        f"{db}/model_calls/{ids['row_id']}",
        f"{db}/model_calls/{ids['row_id']}.json",
        f"{db}/trace_chain?trace_id={quote(ids['trace_id'])}",
        f"{db}/token_totals.json",
        "/no-such-database-anywhere",
        f"{db}/no_such_table",
    ]


# Routes an authenticated viewer (no view_secrets) is expected to read with a 200.
def viewer_ok(path: str) -> bool:
    # refused, or answered with a redirect (resolve; a ledger row or call id to its event page)
    refused = ("/raw", "/no-such", "/no_such", "/-/capsem/resolve", "/tool-calls/", "/rows/")
    return not any(part in path for part in refused)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(url: str, process: subprocess.Popen, seconds: float = 90) -> httpx.Response:
    """Until the server answers; its first answer (the deadline only bounds a hang)."""
    deadline = time.monotonic() + seconds
    address = httpx.URL(url)
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"server exited: {process.stderr.read()}")
        try:
            # A bare connect first, every 50 ms: an HTTP client per try (its TLS context) cost
            # more CPU than the wait, so tries were 200 ms apart, ~0.1 s idle per server start.
            socket.create_connection((address.host, address.port), timeout=5).close()
            return httpx.get(url, timeout=5)
        except (OSError, httpx.HTTPError):
            time.sleep(0.05)
    raise AssertionError(f"{url} never answered")


def stop(process: subprocess.Popen) -> str:
    """Stop the server; its stderr (to look for tracebacks)."""
    process.terminate()
    try:
        _out, err = process.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        _out, err = process.communicate()
    return err or ""
