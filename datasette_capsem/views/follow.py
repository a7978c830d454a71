"""Following a live session: `/-/capsem/sessions/<id>/delta.json` and `/-/capsem/sessions/<id>/tail`.

`delta.json?since=table:id,…` answers the rows every table gained beyond a cursor (the max id
per table the follower has seen), newest first, with the next cursor and whether the session
is still live. The tail page (`tail`, `tail.json`) lists the newest rows of every table, newest
first, filterable by `kind` (a table name, repeatable) and `trace_id`; on a live session it and the overview
poll `delta.json` from `static/capsem-follow.js` (no inline script, text only).

However many followers poll, a ledger is read at most once per interval per file version: the
newest rows are cached by the file's fingerprint (`session.follow.FollowCache`). Reading is the
mounted read-only connection's (readonly.py), which never makes Capsem's writer wait.
Every row shown passes through the credential policy (render.json_response / render.page).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from datasette_capsem import errors, redaction
from datasette_capsem.readonly import file_fingerprint
from datasette_capsem.session import follow
from datasette_capsem.state import get_state
from datasette_capsem.views import render
from datasette_capsem.views.opening import Opened, bad_value, open_session

MAX_KINDS = 40
FOLLOW_POLL_SECONDS = 3
# Rows the tail page shows unless asked for more (`?limit=`): the newest of the rows held
# (up to `follow.WINDOW` per table, thousands on a ledger of many tables); the page and its
# JSON say when more are held, with the link that shows them all.
TAIL_ROWS = 500


async def recent(datasette, opened: Opened, live: bool) -> tuple[follow.Recent, float]:
    """The newest rows of the session's ledger, read once per file version and interval
    however many followers ask (session.follow.FollowCache). `live` is taken before the
    fingerprint: once the writer is gone, the read is of its last version, never older."""
    schema, db = opened.schema, opened.db

    async def compute() -> follow.Recent:
        return await db.execute_fn(lambda conn: follow.recent_rows(conn, schema))

    fingerprint = file_fingerprint(db.source_path)
    cache = get_state(datasette).follow
    return await cache.get(opened.session.id, fingerprint, compute, final=not live)


def is_live(datasette, opened: Opened) -> bool:
    """Live now: a non-empty -wal, or main.db's row (re-read when main.db changed) says running."""
    session = get_state(datasette).catalog.get(opened.session.id) or opened.session
    path = opened.db.source_path if opened.db is not None else session.ledger_path
    return follow.is_live(path, session.status)


async def follow_context(
    datasette, opened: Opened, trace_id: str | None = None
) -> dict[str, Any] | None:
    """The live panel of the overview (or of one trace's page, `trace_id`), None unless the
    session is being written: where the ledger stands, so the page's poller asks only for
    what comes after."""
    if opened.db is None or not is_live(datasette, opened):
        return None
    held, _ = await recent(datasette, opened, True)
    return {
        "live": True,
        "cursor": follow.format_cursor(held.cursor),
        "delta_url": opened.links.session()
        + "/delta.json"
        + (f"?{urlencode({'trace_id': trace_id})}" if trace_id else ""),
        "tail_url": opened.links.session() + "/tail",
        "poll_seconds": FOLLOW_POLL_SECONDS,
        "rows": [],
        "gap": False,
    }


def _kinds(request, tables: list[str]) -> tuple[str, ...]:
    kinds = tuple(dict.fromkeys(k for k in request.args.getlist("kind") if k))[:MAX_KINDS]
    unknown = [k for k in kinds if k not in tables]
    if unknown:
        raise errors.bad_parameter(
            "Bad kind", f"Unknown kind {unknown[0][:100]!r}; kinds are {', '.join(tables)}."
        )
    return kinds


def delta_url(session_url: str, kinds: tuple[str, ...] = (), trace_id: str | None = None) -> str:
    params = [("kind", k) for k in kinds] + ([("trace_id", trace_id)] if trace_id else [])
    return f"{session_url}/delta.json" + (f"?{urlencode(params)}" if params else "")


def _linked(opened: Opened, held: follow.Recent, rows: list[dict[str, Any]]) -> list[dict]:
    """Rows as shown: each field through the credential policy first (by its column name),
    then summarised, and linked to its event or row page. A row of a file version is shown
    the same way to every reader of one policy: each is made once per version and policy
    (`Recent.shown`), however many views, filters and followers ask."""
    policy = (redaction.policy.get(), redaction.hide_free_text.get(), opened.links.session())
    memo = held.shown.setdefault(policy, {})
    missing = [row for row in rows if (row["kind"], row["id"]) not in memo]
    if missing:
        projected = [
            {**row, "fields": redaction.project_row("ledger", row["kind"], row.get("fields") or {})}
            for row in missing
        ]
        for row in render.redacted(projected):
            memo[row["kind"], row["id"]] = {
                **follow.with_summary(row),
                "href": opened.links.ledger_row(row["kind"], row["id"]),
            }
    return [memo[row["kind"], row["id"]] for row in rows]


def _merged_cursor(recent: follow.Recent, since: dict[str, int] | None) -> str:
    cursor = dict(recent.cursor)
    for table, row_id in (since or {}).items():
        if table in cursor:
            cursor[table] = max(cursor[table], row_id)
    return follow.format_cursor(cursor)


async def _follow_data(datasette, request, *, since_required: bool) -> tuple[Opened, dict]:
    opened = await open_session(datasette, request, need_ledger=True)
    tables = follow.followed_tables(opened.schema)
    kinds = _kinds(request, tables)
    try:
        since = follow.parse_cursor(request.args.get("since"))
    except follow.BadCursor as error:
        raise errors.bad_parameter("Bad cursor", str(error)) from error
    live = is_live(datasette, opened)  # before the read: a stopped writer's last rows are in it
    trace_id = request.args.get("trace_id") or None
    if trace_id is not None and bad_value(trace_id, "trace id"):
        raise errors.bad_parameter("Bad trace id", bad_value(trace_id, "trace id"))
    limit = None if since_required else _limit(request)
    held, read_at = await recent(datasette, opened, live)
    part = held.since(since if since_required else None, kinds, trace_id=trace_id)
    rows = part["rows"] if limit is None else part["rows"][:limit]
    base = opened.links.session()
    data = {
        "session_id": opened.session.id,
        "live": live,
        "cursor": _merged_cursor(held, since),
        "rows": _linked(opened, held, rows),
        "gap": part["gap"] or len(rows) < len(part["rows"]),
        "kinds": list(kinds),
        "all_kinds": tables,
        "read_at": read_at,
        "poll_seconds": FOLLOW_POLL_SECONDS,
        "trace_id": trace_id,
        "delta_url": delta_url(base, kinds, trace_id),
    }
    if limit is not None:
        data["partial"] = len(rows) < len(part["rows"])
        data["shown"], data["held"] = len(rows), len(part["rows"])
        params = [("kind", k) for k in kinds] + ([("trace_id", trace_id)] if trace_id else [])
        data["all_url"] = (
            f"{base}/tail?{urlencode([*params, ('limit', len(part['rows']))])}"
            if data["partial"]
            else None
        )
    return opened, data


def _limit(request) -> int:
    """The tail page's `limit` (rows shown, newest first): TAIL_ROWS unless given."""
    text = request.args.get("limit")
    if text is None or text == "":
        return TAIL_ROWS
    if not (text.isascii() and text.isdigit() and len(text) <= 9 and int(text) > 0):
        raise errors.bad_parameter("Bad limit", "limit must be a whole number of rows, 1 or more.")
    return int(text)


async def delta(datasette, request):
    _, data = await _follow_data(datasette, request, since_required=True)
    if request.args.get("since") is None:
        data["rows"] = []  # no cursor: just where the ledger stands now
    return render.json_response(data, headers={"cache-control": "no-store"})


async def tail_page(datasette, request):
    opened, data = await _follow_data(datasette, request, since_required=False)
    context = {
        "session": opened.session.summary(),
        "display_name": opened.session.display_name,
        "links": {
            "overview": opened.links.session(),
            "json": opened.links.session() + "/tail.json",
        },
        **data,
    }
    return await render.page(datasette, request, "tail.html", context, redacted_parts=("rows",))


ROUTES = [
    (r"^/-/capsem/sessions/(?P<session_id>[^/]+)/delta\.json$", delta),
    (r"^/-/capsem/sessions/(?P<session_id>[^/]+)/tail(?P<format>\.json)?$", tail_page),
]
