"""`datasette capsem tail ID_OR_NAME`: print every new row of a live session until it stops.

The same rows as the tail page (`/-/capsem/sessions/<id>/tail`), read the same way: the ledger
is opened read-only (readonly.py) only when its file fingerprint changed, for one short read,
so Capsem's writer never waits on it. First the newest `--last` rows, then each new row as it
reaches the ledger, oldest first (like `tail -f`). Stops, exit 0, when the session is no longer
live (its -wal empty or gone and main.db not `running`), or on Ctrl-C. An unknown or ambiguous
session, or a home that is not there, exits 2 (cli/common.py). Credentials are masked (redaction.py) and control characters escaped.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import click

from datasette_capsem import redaction
from datasette_capsem.catalog import Catalog
from datasette_capsem.cli.common import (
    HomeChoice,
    cache_option,
    home_option,
    resolve_session,
    settings_from_options,
)
from datasette_capsem.ledger.schema import read_schema
from datasette_capsem.readonly import LedgerUnavailable, file_fingerprint, open_readonly
from datasette_capsem.session import follow

EXIT_NO_LEDGER = 2
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """Text a terminal shows as text: control and bidi characters escaped, newlines as \\n."""
    text = text.replace("\n", "\\n")
    return _CONTROL.sub(
        lambda m: (
            f"\\x{ord(m.group()):02x}" if ord(m.group()) < 256 else f"\\u{ord(m.group()):04x}"
        ),
        text,
    )


def line(row: dict) -> str:
    return printable(f"{row['at'] or '-'}  {row['kind']:<24} {row['id']:>7}  {row['summary']}")


def _read(path: Path, cache_dir: Path) -> follow.Recent:
    conn = open_readonly(path, cache_dir)
    try:
        return follow.recent_rows(conn, read_schema(conn))
    finally:
        conn.close()


def _emit(rows: list[dict], as_json: bool) -> None:
    for row in reversed(rows):  # rows come newest first; a terminal reads oldest first
        shown = follow.with_summary(redaction.redact_tree(row))
        if as_json:
            click.echo(json.dumps(shown, default=str))
        else:
            click.echo(line(shown))


@click.command(name="tail")
@click.argument("session")
@home_option
@cache_option
@click.option("--kind", "kinds", multiple=True, help="Only rows of this table (repeatable).")
@click.option("--last", default=20, show_default=True, help="Rows shown before following.")
@click.option("--interval", default=1.0, show_default=True, help="Seconds between looks.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per row.")
def tail(
    session: str,
    home: HomeChoice,
    cache_dir: Path | None,
    kinds: tuple[str, ...],
    last: int,
    interval: float,
    as_json: bool,
) -> None:
    """Print every new row of session SESSION (an id or a name) until it stops."""
    settings = settings_from_options(home, cache_dir)
    catalog = Catalog(settings)
    found = resolve_session(catalog, session)  # an id, a name or an id prefix
    if found.ledger_path is None:
        click.echo(f"error: session {found.id} has no session.db on disk", err=True)
        raise SystemExit(EXIT_NO_LEDGER)
    path, session_id = found.ledger_path, found.id
    try:
        _follow(catalog, session_id, path, settings.cache_dir, kinds, last, interval, as_json)
    except KeyboardInterrupt:
        click.echo("stopped following (Ctrl-C)", err=True)
    except LedgerUnavailable as error:
        click.echo(f"error: the ledger cannot be read: {error.detail}", err=True)
        raise SystemExit(1) from None


def _follow(catalog, session_id, path, cache_dir, kinds, last, interval, as_json) -> None:
    cursor: dict[str, int] | None = None
    seen = None
    while True:
        current = catalog.get(session_id)
        live = follow.is_live(path, current.status if current else None)
        fingerprint = file_fingerprint(path)
        if fingerprint != seen:
            recent = _read(path, cache_dir)
            part = recent.since(cursor, kinds, limit=last if cursor is None else None)
            if part["gap"] and cursor is not None:
                click.echo("(some rows arrived too fast to show)", err=True)
            _emit(part["rows"], as_json)
            cursor = {t: max(i, (cursor or {}).get(t, 0)) for t, i in recent.cursor.items()}
            seen = fingerprint
        if not live:
            # The writer's last commit and its checkpoint are in the read above (the
            # fingerprint is taken after liveness): nothing more will come.
            if file_fingerprint(path) == seen:
                click.echo(f"session {session_id} is not live: stopped following", err=True)
                return
            continue
        time.sleep(interval)
