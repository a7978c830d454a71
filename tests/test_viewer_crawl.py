"""Issue 25's done-when crawl: what a viewer sees is decided once, for every surface.

A copy of the generated home is planted, with sqlite3 and the way Capsem's writer stores them,
with the credential corpus (tests/corpus: 184 kinds x 5 placements, each in one of the text
encodings) in every column that is not shown raw (names an agent chose, carriers, free text, an
unclassified column)
of every table of a current-era ledger, an old-era ledger (1.1), a 0.x ledger and main.db;
bodies in every byte encoding (gzip, deflate, brotli, zstd, base64, UTF-16/32); streamed
secrets split over SSE deltas (Anthropic text/thinking/input_json, OpenAI function.arguments,
Responses) in body blobs and body previews; a registry env value. Each free-text cell also
holds a plain marker word.

Then the README's team recipe is served and every route is walked, the plugin's routes taken
from its route table (`views/routes.py`, so a new route is crawled without a change here),
Datasette's from the databases' own listings (every table in HTML, JSON in each `_shape`, CSV,
the planted rows, canned queries): anonymous gets nothing, a viewer (who may run SQL) sees no
planted secret and sees that something was masked, the auditor (view_secrets) sees every
planted secret, so the test fails both ways. With `hide_free_text: true`, the viewer sees no
planted word either. The CLI's viewer-facing outputs (`tail`, `check --json`, `resolve`) are
read too, and every filter, sort, facet, `_where` and SQL probe of a column not shown raw is
refused.
"""

from __future__ import annotations

import functools
import html
import json
import re
import shutil
import socket
import sqlite3
import string
import threading
import time
from pathlib import Path
from urllib.parse import quote, unquote, unquote_plus

import pytest
import pytest_asyncio
import uvicorn
from blake3 import blake3
from click.testing import CliRunner
from datasette.cli import cli

from datasette_capsem.checks import hookimpl
from datasette_capsem.cli.serve import http_protocol
from datasette_capsem.ledger import tables
from datasette_capsem.permissions import DATASETTE_1
from datasette_capsem.plugins import plugin_manager
from datasette_capsem.queries import QuerySpec
from datasette_capsem.views.routes import ROUTES
from tests.corpus.encodings import BYTE_ENCODINGS, CREDENTIALS, TEXT_ENCODINGS, encode_bytes
from tests.helpers import make_datasette, session_in
from tests.otlp_receiver import Receiver
from tests.security_support import free_port, plugin_routes
from tests.test_mask_streams import STREAMS
from tests.test_security_hardening import ROOT, headers_for, team, team_metadata

async_test = pytest.mark.asyncio(loop_scope="session")
pytestmark = pytest.mark.heavy  # about a minute of CPU: scheduled first (conftest.py)
MARKERS = ("[redacted:", "[hidden")
FUTURE = "future_column"  # a column no one classified, added to one table of each ledger
SAMPLES_PER_CELL = 4
UNHEX = str.maketrans("0123456789abcdef", "ghjkmnpqrstvwxyz")
PLACEMENTS = 5  # each kind of tests/corpus/credentials.jsonl is in 5 placements, in order
WORD_LETTERS = string.ascii_lowercase


# --- the corpus ---------------------------------------------------------------------------------


def word(n: int) -> str:
    """A plain marker word, unique per n (letters only: no credential shape)."""
    letters = ""
    while True:
        n, r = divmod(n, 26)
        letters += WORD_LETTERS[r]
        if n == 0:
            break
    return f"quillwort{letters}zed"


class Corpus:
    """Hands out samples (each once, in turn, in a text encoding) and remembers what it
    planted: the secrets, the streamed fragments and the plain words."""

    def __init__(self):
        self.next = 0
        self.secrets: set[str] = set()
        self.fragments: set[str] = set()
        self.words: set[str] = set()
        self.never_shown: set[str] = set()
        self.kinds: set[str] = set()
        self.encodings: set[str] = set()
        self.cells: list[tuple[str, str, str]] = []  # (database, table, column) planted
        self.at = ""  # where the next samples go
        self.where: dict[str, str] = {}  # secret -> where it was planted, for messages

    def sample(self) -> dict:
        # Every kind first (each in another placement), then again: kind k, placement p.
        kinds = len(CREDENTIALS) // PLACEMENTS
        n = self.next
        sample = CREDENTIALS[(n % kinds) * PLACEMENTS + (n // kinds + n) % PLACEMENTS]
        self.next += 1
        self.kinds.add(sample["kind"])
        self.secrets.update(sample["secrets"])
        for secret in sample["secrets"]:
            self.where.setdefault(secret, f"{self.at} ({sample['kind']})")
        return sample

    def text(self, n: int = SAMPLES_PER_CELL) -> str:
        parts = []
        for _ in range(n):
            names = sorted(TEXT_ENCODINGS)
            name = names[self.next % len(names)]
            sample = self.sample()
            self.encodings.add(name)
            parts.append(TEXT_ENCODINGS[name](sample["text"]))
        return "\n".join(parts)

    def word(self) -> str:
        found = word(len(self.words))
        self.words.add(found)
        return found

    def body(self, encoding: str) -> tuple[bytes, str]:
        self.encodings.add(encoding)
        return encode_bytes(encoding, self.sample()["text"])

    def streams(self) -> list[str]:
        """One SSE stream per streaming form, each writing a key of its own in deltas."""
        found = []
        for n, make in enumerate(STREAMS.values()):
            # 36 letters no id, hash or timestamp holds (no hex digit), in mixed case
            tail = blake3(f"stream {n}".encode()).hexdigest()[:36].translate(UNHEX)
            key = "ghp_" + "".join(c.upper() if i % 3 else c for i, c in enumerate(tail))
            parts = ["export GITHUB_TOKEN=", *[key[i : i + 6] for i in range(0, len(key), 6)]]
            # each too short for any rule; the first holds the prefix, the last is short
            self.fragments.update(part for part in parts[2:] if len(part) == 6)
            events = [f"data: {json.dumps(make(part))}" for part in parts + ["\n"]]
            found.append("\n\n".join(['data: {"type": "message_start"}', *events]) + "\n\n")
        self.encodings.add("sse")
        return found


# --- planting -----------------------------------------------------------------------------------


def _columns(conn: sqlite3.Connection, table: str) -> list[tuple[str, str, bool, object]]:
    return [
        (r[1], r[2].upper(), bool(r[3]), r[4]) for r in conn.execute(f"PRAGMA table_info({table})")
    ]


def _row_of(conn: sqlite3.Connection, table: str) -> dict:
    """A row to copy: the table's first, or one of placeholders for its NOT NULL columns."""
    cursor = conn.execute(f"SELECT * FROM {table} ORDER BY rowid LIMIT 1")
    row = cursor.fetchone()
    names = [d[0] for d in cursor.description]
    if row is not None:
        return dict(zip(names, row, strict=True))
    ddl = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]
    values = {}
    for name, kind, notnull, default in _columns(conn, table):
        if notnull and default is None:
            json_only = f"json_valid({name})" in ddl.replace(" ", "")
            values[name] = 0 if "INT" in kind or "REAL" in kind else "{}" if json_only else ""
    return values


def _insert(conn: sqlite3.Connection, table: str, values: dict) -> int:
    values = {k: v for k, v in values.items() if k != "id"}
    columns = ", ".join(f'"{k}"' for k in values)
    marks = ", ".join("?" for _ in values)
    return conn.execute(
        f"INSERT INTO {table} ({columns}) VALUES ({marks})", list(values.values())
    ).lastrowid


def _tables(conn: sqlite3.Connection) -> list[str]:
    return [
        name
        for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
    ]


def plant_ledger(path: Path, corpus: Corpus, database: str = "ledger") -> dict:
    """Copy a row of every table with each column not shown raw holding corpus samples (and a
    plain word in free text); body blobs in every byte encoding and as streams. Returns ids."""
    conn = sqlite3.connect(path)
    # The placeholders of a table that had no row to copy (a NOT NULL id's '') break CHECKs
    # no planted value is about.
    conn.execute("PRAGMA ignore_check_constraints = ON")
    trace = None
    if "model_calls" in _tables(conn):
        found = conn.execute("SELECT trace_id FROM model_calls WHERE trace_id IS NOT NULL LIMIT 1")
        trace = (found.fetchone() or [None])[0]
    planted: dict = {"trace": trace, "rows": {}, "events": {}, "blobs": [], "body_events": []}
    with_future = "net_events" if "net_events" in _tables(conn) else _tables(conn)[0]
    conn.execute(f"ALTER TABLE {with_future} ADD COLUMN {FUTURE} TEXT")
    for table in _tables(conn):
        columns = _columns(conn, table)
        if any(name == "rowid" for name, *_ in columns) or table.endswith(("_fts", "_idx")):
            continue
        base = _row_of(conn, table)
        ddl = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]
        changes = {}
        for name, kind, _notnull, _default in columns:
            column_kind = tables.column_kind(database, table, name)
            if column_kind == tables.SHOWN or ("INT" in kind or "REAL" in kind):
                continue
            corpus.at = f"{path.parent.name}/{path.name}:{table}.{name}"
            value = corpus.text()
            if column_kind == tables.FREE_TEXT:  # first too: labels show a value's start
                marker = corpus.word()
                value = f"{marker} {value} {marker}"
            if f"json_valid({name})" in ddl.replace(" ", ""):
                value = json.dumps({"text": value})
            changes[name] = value.encode() if kind == "BLOB" else value
            corpus.cells.append((database, table, name))
        if not changes:
            continue
        names = {name for name, *_ in columns}
        event_id = blake3(f"{path}{table}".encode()).hexdigest()[:12]
        if "event_id" in names:
            changes["event_id"] = event_id
            planted["events"][table] = event_id
        if "trace_id" in names and trace:
            changes["trace_id"] = trace
        try:
            planted["rows"][table] = _insert(conn, table, {**base, **changes})
        except sqlite3.IntegrityError:  # a unique column copied: plant on the row itself
            if conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 0:
                raise
            conn.execute(
                f"UPDATE {table} SET {', '.join(f'{k} = ?' for k in changes)} WHERE rowid = ?",
                [*changes.values(), conn.execute(f"SELECT min(rowid) FROM {table}").fetchone()[0]],
            )
            planted["rows"][table] = conn.execute(f"SELECT min(rowid) FROM {table}").fetchone()[0]
    if "event_body_blobs" in _tables(conn) and database == "ledger":
        blob_columns = {name for name, *_ in _columns(conn, "event_body_blobs")}
        event = planted["events"].get("net_events")
        base = _row_of(conn, "event_body_blobs")
        corpus.at = f"{path.parent.name}/{path.name}:event_body_blobs.body"
        bodies = [corpus.body(name) for name in sorted(BYTE_ENCODINGS)]
        bodies += [(s.encode(), "text/event-stream") for s in corpus.streams()]
        net = dict(
            zip(
                [c[0] for c in _columns(conn, "net_events")],
                conn.execute(
                    "SELECT * FROM net_events WHERE id = ?", (planted["rows"]["net_events"],)
                ).fetchone(),
                strict=True,
            )
        )
        for n, (body, content_type) in enumerate(bodies):
            event = f"{event[:9]}{n:03d}"  # each body its own event (one body per direction)
            _insert(conn, "net_events", {**net, "event_id": event})
            planted["body_events"].append(event)
            values = {
                **base,
                "event_id": event,
                "source_table": "net_events",
                "direction": "response",
                "content_type": content_type,
                "body": body,
                "original_bytes": len(body),
                "stored_bytes": len(body),
                "body_hash": "blake3:" + blake3(body).hexdigest(),
                "trace_id": trace,
            }
            planted["blobs"].append(
                _insert(
                    conn, "event_body_blobs", {k: v for k, v in values.items() if k in blob_columns}
                )
            )
        if "net_events" in planted["rows"]:  # a streamed preview, as the writer keeps it
            conn.execute(
                "UPDATE net_events SET response_body_preview = ? WHERE id = ?",
                (corpus.streams()[2], planted["rows"]["net_events"]),
            )
    conn.commit()
    conn.close()
    return planted


REGISTRY_SECRET = "glpat-Rg7hX2kq9PzW4mT1vB6n"
NAME_TOKEN = "ghp_Nm4kQ8zR2vX6wT1yB5cH9jL3pD7fG0sA2eU4"
SECRET_NAME = f"deploy-{NAME_TOKEN}"


def plant_registry(home: Path, corpus: Corpus) -> None:
    """A persistent VM's env value in the registry (a carrier)."""
    path = home / "run" / "persistent_registry.json"
    registry = json.loads(path.read_text())
    for vm in registry["vms"].values():
        vm.setdefault("env", {})["DEPLOY_TOKEN"] = REGISTRY_SECRET
    vm = registry["vms"].pop("scratch-vm")  # a display name holding a token
    registry["vms"][SECRET_NAME] = {**vm, "name": SECRET_NAME}
    path.write_text(json.dumps(registry, indent=2))
    corpus.never_shown.add(REGISTRY_SECRET.removeprefix("glpat-"))  # to anyone: no page shows env


class Planted:
    def __init__(self, home: Path, root: Path, corpus: Corpus, sessions: list[dict]):
        self.home, self.root, self.corpus, self.sessions = home, root, corpus, sessions


@pytest.fixture(scope="module")
def planted(capsem_home, manifest, tmp_path_factory) -> Planted:
    root = tmp_path_factory.mktemp("viewer-crawl")
    home = root / "home"
    shutil.copytree(capsem_home, home, symlinks=True)
    corpus = Corpus()
    picks = [
        session_in(
            manifest, era="head", kind="ephemeral", has=("clean", "traces"), lacks=("live",)
        ),
        session_in(manifest, era="1.1", has=("traces",), lacks=("live",)),
        session_in(manifest, era="0.16", kind="legacy", has=("traces",)),
    ]
    sessions = []
    for pick in picks:
        info = plant_ledger(home / pick["ledger"], corpus)
        sessions.append({**pick, **info})
    main_db = home / "sessions" / "main.db"
    plant_ledger(main_db, corpus, database="main")
    conn = sqlite3.connect(main_db)  # the planted sessions' own rows in main.db
    for session in sessions:
        conn.execute(
            "UPDATE sessions SET command = ? WHERE id = ?",
            (corpus.text() + " " + corpus.word(), session["id"]),
        )
    conn.commit()
    conn.close()
    plant_registry(home, corpus)
    return Planted(home, root, corpus, sessions)


def test_the_corpus_covers_the_issue(planted):
    corpus = planted.corpus
    assert len(corpus.kinds) >= 100 and len(corpus.fragments) >= 30, len(corpus.kinds)
    assert [c["kind"] for c in CREDENTIALS[::PLACEMENTS]] == [
        c["kind"] for c in CREDENTIALS[PLACEMENTS - 1 :: PLACEMENTS]
    ]  # the corpus's order, which `Corpus.sample` relies on
    assert {
        "raw",
        "json-escapes",
        "url",
        "html-entities",
        "gzip",
        "brotli",
        "sse",
    } <= corpus.encodings
    kinds = {tables.column_kind(*cell) for cell in corpus.cells}
    assert kinds == {tables.NAMED, tables.CARRIER, tables.FREE_TEXT, tables.UNCLASSIFIED}
    databases = {cell[0] for cell in corpus.cells}
    assert databases == {"ledger", "main"}
    eras = {session["era"] for session in planted.sessions}
    assert {"head", "1.1", "0.16"} <= eras


# --- reading what was served ---------------------------------------------------------------------

_JSON_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})|\\(.)")
_SIMPLE = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}


def _json_unescape(text: str) -> str:
    return _JSON_ESCAPE.sub(
        lambda m: chr(int(m.group(1), 16)) if m.group(1) else _SIMPLE.get(m.group(2), m.group(2)),
        text,
    )


def readings(text: str) -> list[str]:
    """What a reader could make of a response: as served, and with JSON escapes, URL-encoding
    (`+` read as a space, and not) and HTML entities undone, three passes of each in turn (an
    escape nested in another, in any order, up to three deep)."""
    found = [text]
    for unquoting in (unquote, unquote_plus):
        current = text
        for _ in range(3):
            if not any(c in current for c in "\\%&+"):
                break
            decoded = html.unescape(unquoting(_json_unescape(current)))
            if decoded == current:
                break
            found.append(decoded)
            current = decoded
    return found


def hex_reading(text: str) -> str:
    """The bytes of every hex dump in a response, as latin-1 text."""
    out = []
    for run in re.findall(r"(?:[0-9a-f]{2}[ \n]){8,}", text):
        try:
            out.append(bytes.fromhex(run).decode("latin-1"))
        except ValueError:
            continue
    return "\n".join(out)


def seen_in(text: str, wanted: set[str]) -> set[str]:
    return set(_seen_in(text, frozenset(wanted)))


# A run of characters no planted item is cut at: an item made only of them (all but a few)
# occurs in a reading exactly when it occurs in one of the reading's runs, and a crawl's answers
# repeat most of their runs (markup, keys, ids), so the distinct runs are a fraction of the text.
RUN = re.compile(r"[^\s\"'<>&\\,;\[\](){}`|?\0]+")


@functools.lru_cache(maxsize=8)
def _in_runs(wanted: frozenset[str]) -> tuple[frozenset[str], frozenset[str]]:
    """`wanted` split: the items made of run characters, the others."""
    inside = frozenset(item for item in wanted if RUN.fullmatch(item))
    return inside, wanted - inside


@functools.lru_cache(maxsize=256)
def _seen_in(text: str, wanted: frozenset[str]) -> frozenset[str]:
    # Remembered: most answers of a crawl are the same refusal, read for every planted item.
    every = "\0".join(readings(text) + [hex_reading(text)])
    inside, across = _in_runs(wanted)
    runs = "\0".join(set(RUN.findall(every)))
    return frozenset(
        [item for item in inside if item in runs] + [item for item in across if item in every]
    )


# --- the routes ---------------------------------------------------------------------------------

SHAPES = ("", "?_shape=array", "?_shape=arrays", "?_shape=objects", "?_shape=object")
# Every shape for these; the others in the default shape and as an array (the shapes of one
# query's rows differ only in how the same cells are arranged).
ALL_SHAPES = {"net_events", "event_body_blobs", "model_calls", "sessions", "text_rows"}
PARAMS = {"n": "50", "all": "1", "min_cost": "0"}


async def _json(datasette, url: str) -> dict:
    response = await datasette.client.get(url, headers=headers_for("auditor"))
    assert response.status_code == 200, (url, response.text[:300])
    return response.json()


async def datasette_routes(datasette, database: str, rows: dict[str, int], trace) -> list[str]:
    """Datasette's pages of one database: the database in HTML and JSON, every table in
    HTML, JSON in every `_shape` and CSV, the planted rows, every canned query."""
    db = "/" + quote(database, safe="")
    listing = await _json(datasette, f"{db}.json")
    found = [db, f"{db}.json"]
    for table in listing["tables"]:
        base = f"{db}/{quote(table['name'], safe='')}"
        found += [base, f"{base}.csv?_size=max"]
        shapes = SHAPES if table["name"] in ALL_SHAPES else SHAPES[:2]
        found += [f"{base}.json{shape}{'&' if shape else '?'}_size=max" for shape in shapes]
    for table, row in rows.items():
        found += [f"{db}/{table}/{row}", f"{db}/{table}/{row}.json"]
    values = {**PARAMS, "trace_id": trace or "", "turn_id": trace or ""}
    values["model_call_id"] = str(rows.get("model_calls", 1))
    for query in listing.get("queries", []):
        params = "&".join(f"{p}={quote(values.get(p, ''))}" for p in query.get("params", []))
        base = f"{db}/{quote(query['name'], safe='')}"
        found += [f"{base}?{params}", f"{base}.json?_shape=array&{params}", f"{base}.csv?{params}"]
    return found


def session_plugin_routes(session: dict) -> list[str]:
    """Every plugin route of the route table, once per planted event, body and row."""
    trace = session["trace"] or "none"
    pairs = list(zip(session["body_events"], [str(b) for b in session["blobs"]], strict=True))
    pairs = pairs or [("none", "1")]
    pairs += [(event, pairs[0][1]) for event in session["events"].values()]
    base = {
        "session_id": session["id"],
        "trace_id": trace,
        "row_id": str(session["rows"].get("model_calls", 1)),
        "table": "model_calls",
        "call_id": "none",
    }
    # A search for an event id answers where the id is (session, table, row and trace ids):
    # none of a row's cells. Without an index each search reads every ledger of the home, so
    # the id search is made for one body's event and one planted row's, not for each of them.
    searched = {pairs[0][0], *list(session["events"].values())[:1]}
    found: dict[str, None] = {}
    for event, blob in pairs:
        routes = plugin_routes({**base, "event_id": event, "blob_id": blob})
        if event not in searched:
            routes = [route for route in routes if not route.startswith("/-/capsem/search.json")]
        found.update(dict.fromkeys(routes))
    sp = f"/-/capsem/sessions/{quote(session['id'], safe='')}"
    for table, row in session["rows"].items():
        found[f"{sp}/traces/{quote(trace, safe='')}/node.json?id={table}:{row}"] = None
        found[f"{sp}/rows/{table}/{row}"] = None
    return list(found)


async def all_routes(datasette, planted: Planted) -> list[str]:
    routes: dict[str, None] = {}
    for session in planted.sessions:
        routes.update(dict.fromkeys(session_plugin_routes(session)))
        routes.update(
            dict.fromkeys(
                await datasette_routes(datasette, session["id"], session["rows"], session["trace"])
            )
        )
    routes.update(dict.fromkeys(await datasette_routes(datasette, "main", {}, None)))
    routes.update(dict.fromkeys(await datasette_routes(datasette, "index", {}, None)))
    words = sorted(planted.corpus.words)[:3]
    for q in [*words, "password", "token", "GITHUB_TOKEN", "co-work-1"]:
        routes[f"/-/capsem/search?q={quote(q)}"] = None
        routes[f"/-/capsem/search.json?q={quote(q)}"] = None
    routes["/-/capsem/resolve?name=co-work-1"] = None
    routes["/-/capsem/sessions.json?all=1&_size=max"] = None
    return list(routes)


# --- the crawl ----------------------------------------------------------------------------------


class Seen:
    """What one actor was served: per URL, its status, the planted items read in it, and
    whether a masking marker was."""

    def __init__(self):
        self.status: dict[str, int] = {}
        self.items: dict[str, set[str]] = {}
        self.marked: dict[str, bool] = {}
        self.errors: dict[str, str] = {}

    def union(self) -> set[str]:
        return set().union(*self.items.values()) if self.items else set()

    def leaks(self) -> dict[str, list[str]]:
        return {url: sorted(found)[:5] for url, found in self.items.items() if found}


async def crawl(datasette, routes: list[str], actor: str, wanted: set[str]) -> Seen:
    seen = Seen()
    wanted = frozenset(wanted)  # hashed once: `seen_in` remembers its answers per text
    for route in routes:
        response = await datasette.client.get(
            route, headers=headers_for(actor), follow_redirects=True
        )
        if response.status_code >= 500 or "Traceback" in response.text:
            seen.errors[route] = f"{response.status_code} {response.text[-300:]}"
        text = response.text
        if "q=" in route:  # a search echoes its own query: not a value of the ledger
            asked = unquote(route.split("q=", 1)[1].split("&")[0])
            text = text.replace(asked, "")
        for hop in response.history:
            text += hop.headers.get("location", "") + hop.text
        seen.status[route] = response.status_code
        seen.items[route] = seen_in(text, wanted)
        seen.marked[route] = any(marker in text for marker in MARKERS) or "redacted" in text
    return seen


def same_cells_once(routes: list[str]) -> list[str]:
    """`routes` without those showing again the cells another shows: Datasette's HTML table
    pages (their JSON shows the same cells) and the other shapes of one JSON (the same cells,
    arranged otherwise). The viewer's crawl walks them all."""
    datasette_html = re.compile(r"^/[^-][^?]*/[^/?.]+$")
    again = ("_shape=arrays", "_shape=objects", "_shape=object&")
    return [
        route
        for route in routes
        if not datasette_html.match(route) and not any(shape in route for shape in again)
    ]


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def served(planted):
    datasette = await team(planted.home, planted.root / "cache", index_refresh_seconds=0)
    await datasette.client.get("/-/capsem/sessions.json", headers=headers_for("auditor"))
    routes = await all_routes(datasette, planted)
    return datasette, routes


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def crawled(served, planted):
    datasette, routes = served
    corpus = planted.corpus
    wanted = corpus.secrets | corpus.fragments | corpus.never_shown
    # The auditor's crawl proves every planted secret reachable, and which pages show one:
    # Datasette's HTML table pages show the cells its JSON shows, so they are left out.
    audited = same_cells_once(routes)
    return {
        "anonymous": await crawl(datasette, routes, "anonymous", wanted),
        "operator": await crawl(datasette, routes, "operator", wanted),
        "auditor": await crawl(datasette, audited, "auditor", wanted),
    }


@async_test
async def test_the_crawl_walks_every_route_of_the_route_table(served):
    _datasette, routes = served
    for pattern, _view in ROUTES:
        matcher = re.compile(pattern)
        assert any(matcher.match(route.split("?")[0]) for route in routes), pattern


@async_test
async def test_no_route_fails_for_any_actor(crawled):
    for actor, seen in crawled.items():
        assert not seen.errors, (actor, len(seen.errors), dict(list(seen.errors.items())[:5]))


@async_test
async def test_anonymous_is_served_nothing(crawled):
    anonymous = crawled["anonymous"]
    assert not anonymous.leaks()
    answered = {url: s for url, s in anonymous.status.items() if s not in (401, 403)}
    assert not answered, answered


@async_test
async def test_a_viewer_sees_no_planted_secret_and_sees_that_something_was_masked(crawled):
    viewer, auditor = crawled["operator"], crawled["auditor"]
    leaks = viewer.leaks()
    assert not leaks, (len(leaks), dict(list(leaks.items())[:20]))
    unmarked = [
        url
        for url, found in auditor.items.items()
        if found and viewer.status[url] == 200 and not viewer.marked[url]
    ]
    assert len(auditor.items) > 300  # pages with planted values were compared
    assert not unmarked, unmarked[:20]


@async_test
async def test_the_auditor_sees_every_planted_secret(crawled, planted):
    corpus = planted.corpus
    missing = (corpus.secrets | corpus.fragments) - crawled["auditor"].union()
    assert not missing, (len(missing), sorted(corpus.where.get(m, m) for m in missing)[:20])


# --- hide_free_text: no planted word either --------------------------------------------------


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def hidden_crawl(planted, served):
    _datasette, routes = served
    datasette = await team(
        planted.home, planted.root / "cache-hide", hide_free_text=True, index_refresh_seconds=0
    )
    await datasette.client.get("/-/capsem/sessions.json", headers=headers_for("auditor"))
    corpus = planted.corpus
    wanted = corpus.words | corpus.secrets | corpus.fragments | corpus.never_shown
    return {"operator": await crawl(datasette, routes, "operator", wanted)}


@async_test
async def test_hide_free_text_leaves_a_viewer_no_planted_word(hidden_crawl, planted):
    viewer = hidden_crawl["operator"]
    assert not viewer.errors, dict(list(viewer.errors.items())[:5])
    leaks = viewer.leaks()
    assert not leaks, (len(leaks), dict(list(leaks.items())[:20]))


# --- the CLI's masked outputs (tail, check --json, resolve, push-otlp's payload) -------------


def test_cli_outputs_for_viewers_carry_no_planted_secret(planted):
    corpus = planted.corpus
    wanted = corpus.secrets | corpus.fragments | corpus.never_shown
    common = ["--home", str(planted.home), "--cache-dir", str(planted.root / "cli-cache")]
    outputs = {}
    for session in planted.sessions:
        sid = session["id"]
        for argv in (
            ["tail", sid, "--last", "100000"],
            ["tail", sid, "--last", "100000", "--json"],
            ["check", sid, "--json"],
        ):
            result = CliRunner().invoke(cli, ["capsem", *argv, *common], catch_exceptions=False)
            assert "Traceback" not in result.output, argv
            outputs[" ".join(argv)] = result.output
    result = CliRunner().invoke(cli, ["capsem", "resolve", "co-work-1", "--json", *common])
    outputs["resolve"] = result.output
    with Receiver() as receiver:  # push-otlp's payload, masked by default, as a store gets it
        result = CliRunner().invoke(
            cli, ["capsem", "push-otlp", "--endpoint", receiver.url, *common]
        )
        # 1: the generated home's broken ledgers are unreadable (and said so)
        assert result.exit_code in (0, 1) and "Traceback" not in result.output
        spans = [
            [span.name, span.attributes, span.events, span.resource] for span in receiver.spans
        ]
    outputs["push-otlp"] = json.dumps(spans, default=str)
    assert len(spans) > 100 and any(marker in outputs["push-otlp"] for marker in MARKERS)
    leaks = {argv: sorted(seen_in(out, wanted))[:3] for argv, out in outputs.items()}
    assert not {k: v for k, v in leaks.items() if v}, leaks
    tails = "".join(out for argv, out in outputs.items() if argv.startswith("tail"))
    assert any(marker in tails for marker in MARKERS)  # masked, visibly


# --- no oracle: every probe of a column not shown raw is refused ----------------------------


def probes(planted: Planted) -> list[str]:
    found = []
    for database, table, column in sorted(set(planted.corpus.cells)):
        if database == "main":
            db = "/main"
        else:
            session = next(s for s in planted.sessions if table in s["rows"])
            db = "/" + quote(session["id"], safe="")
        t = f"{db}/{table}.json"
        if tables.column_kind(database, table, column) != tables.NAMED:
            # a NAMED column is faceted and filtered by a whole value (test_allowlist)
            found += [f"{t}?{column}=a", f"{t}?_facet={column}"]
        found += [
            f"{t}?{column}__startswith=a",
            f"{t}?{column}__gt=a",
            f"{t}?_sort={column}",
            f"{t}?_where=" + quote(f"{column} like 'a%'"),
            f"{db}.json?sql=" + quote(f"select hex({column}) from {table}"),
            f"{db}.json?sql=" + quote(f"select count(*) from {table} where {column} like 'a%'"),
        ]
    return found


@async_test
async def test_every_probe_of_a_column_not_shown_is_refused_for_a_viewer(served, planted):
    datasette, _routes = served
    answered = []
    urls = probes(planted)
    for url in urls:
        for actor in ("operator",):  # may run SQL; a viewer's filters take the same path
            response = await datasette.client.get(
                url, headers=headers_for(actor), follow_redirects=True
            )
            if response.status_code != 403:
                answered.append((actor, url, response.status_code))
    assert not answered, (len(answered), len(urls), answered[:20])
    auditor = await datasette.client.get(urls[0], headers=headers_for("auditor"))
    assert auditor.status_code == 200  # the probe itself is a good request: the test can fail


@async_test
async def test_a_canned_query_whose_parameter_compares_free_text_is_refused_for_a_viewer(
    served, planted
):
    """A parameter compared with a column not shown raw is a filter on it (an oracle), be the
    query Capsem's or another package's; one compared with shown columns is answered."""

    class ByName:
        @hookimpl
        def capsem_queries(self):
            return [
                QuerySpec(
                    id="dns_by_name",
                    name="dns_by_name",
                    title="DNS by name",
                    description="A query whose parameter compares a free-text column.",
                    sql="SELECT id, decision FROM dns_events WHERE (:q = '' OR qname LIKE :q)",
                    params=("q",),
                    requires={"dns_events": ("id", "decision", "qname")},
                ),
                QuerySpec(
                    id="dns_by_decision",
                    name="dns_by_decision",
                    title="DNS by decision",
                    description="A query whose parameter compares a shown column.",
                    sql="SELECT id, qname FROM dns_events WHERE decision = :d",
                    params=("d",),
                    requires={"dns_events": ("id", "decision", "qname")},
                ),
            ]

    datasette, _routes = served
    db = "/" + quote(planted.sessions[0]["id"], safe="")
    plugin = ByName()
    plugin_manager().register(plugin)
    try:
        for actor in ("viewer", "operator"):
            probe = await datasette.client.get(
                f"{db}/dns_by_name.json?q=a%25", headers=headers_for(actor)
            )
            assert probe.status_code == 403, (actor, probe.text[:300])
            assert "qname" in probe.text and "capsem-view-secrets" in probe.text
            empty = await datasette.client.get(
                f"{db}/dns_by_name.json?q=", headers=headers_for(actor)
            )
            assert empty.status_code == 200  # compares nothing
            shown = await datasette.client.get(
                f"{db}/dns_by_decision.json?d=allowed", headers=headers_for(actor)
            )
            assert shown.status_code == 200, shown.text[:300]
        auditor = await datasette.client.get(
            f"{db}/dns_by_name.json?q=a%25", headers=headers_for("auditor")
        )
        assert auditor.status_code == 200
        for query in ("trace_chain", "model_call"):  # Capsem's own, with shown parameters
            own = await datasette.client.get(
                f"{db}/{query}.json?trace_id={planted.sessions[0]['trace']}&model_call_id=1",
                headers=headers_for("viewer"),
            )
            assert own.status_code == 200, (query, own.text[:300])
    finally:
        plugin_manager().unregister(plugin)


@async_test
async def test_did_you_mean_confirms_no_masked_part_of_a_display_name(served):
    """A display name holding a token is shown masked; 'did you mean' matches what is shown,
    so a typed prefix of the token is answered the same whether its next character is right
    or wrong (else the token is read one character at a time)."""
    datasette, _routes = served
    known = "deploy-" + NAME_TOKEN[:12]
    answers = {}
    for guess in (NAME_TOKEN[12], "0" if NAME_TOKEN[12] != "0" else "1"):
        for route in ("/-/capsem/sessions/{}.json", "/-/capsem/resolve.json?name={}"):
            value = known + guess
            response = await datasette.client.get(
                route.format(quote(value, safe="")), headers=headers_for("viewer")
            )
            assert response.status_code == 404, (route, response.text[:200])
            answers.setdefault(route, set()).add(response.text.replace(value, "VALUE"))
            assert NAME_TOKEN[4:] not in response.text
    assert all(len(found) == 1 for found in answers.values()), answers
    auditor = await datasette.client.get(
        f"/-/capsem/resolve.json?name={quote(known + NAME_TOKEN[12])}",
        headers=headers_for("auditor"),
    )
    assert SECRET_NAME in auditor.text  # the auditor is offered it: the test can fail


def test_the_launchers_400_to_a_malformed_request_carries_the_security_headers():
    """uvicorn answers a request it cannot parse before any ASGI layer runs; the plugin's
    launcher (`datasette capsem serve`) gives that answer the headers of every other one.
    (`datasette serve` cannot: docs/operating.md has the reverse proxy add them.)"""

    async def app(scope, receive, send):  # never reached by a malformed request
        raise AssertionError("the application saw a malformed request")

    port = free_port()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, http=http_protocol(), log_level="error", lifespan="off"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        while not server.started:
            assert thread.is_alive()
            time.sleep(0.05)
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(b"GET /\x00bad HTTP/1.1\r\nHost: x\r\n\r\n")
            answer = b""
            while chunk := sock.recv(4096):
                answer += chunk
    finally:
        server.should_exit = True
        thread.join(timeout=10)
    head = answer.split(b"\r\n\r\n", 1)[0].lower()
    assert head.startswith(b"http/1.1 400"), answer[:200]
    for name in (b"x-content-type-options", b"x-frame-options", b"content-security-policy"):
        assert b"\r\n" + name + b":" in head, (name, head)


@async_test
async def test_an_operators_canned_query_comparing_free_text_is_refused_for_a_viewer(planted):
    """The same for a canned query the operator wrote in metadata.yml (datasette.yaml on
    1.0): its parameter compared with `qname` would be a filter on it."""

    session = planted.sessions[0]["id"]
    queries = {
        "by_qname": {"sql": "select id, decision from dns_events where qname like :q"},
        "by_decision": {"sql": "select id from dns_events where decision = :d"},
    }
    metadata = team_metadata(index_refresh_seconds=0)
    if DATASETTE_1:
        import yaml

        config = yaml.safe_load((ROOT / "datasette.yaml").read_text())
        config["allow_sql"] = metadata["allow_sql"]
        config["databases"] = {session: {"queries": queries}}
        datasette = await make_datasette(
            planted.home, planted.root / "cache-own", metadata=metadata, config=config
        )
    else:
        metadata["databases"] = {session: {"queries": queries}}
        settings = json.loads((ROOT / "settings.json").read_text())
        datasette = await make_datasette(
            planted.home, planted.root / "cache-own", metadata=metadata, settings=settings
        )
    db = "/" + quote(session, safe="")
    refused = await datasette.client.get(
        f"{db}/by_qname.json?q=a%25", headers=headers_for("viewer")
    )
    assert refused.status_code == 403 and "qname" in refused.text, refused.text[:300]
    shown = await datasette.client.get(
        f"{db}/by_decision.json?d=allowed", headers=headers_for("viewer")
    )
    assert shown.status_code == 200, shown.text[:300]
    auditor = await datasette.client.get(
        f"{db}/by_qname.json?q=a%25", headers=headers_for("auditor")
    )
    assert auditor.status_code == 200, auditor.text[:300]
