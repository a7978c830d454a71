"""`datasette capsem list`: Capsem's `list_sessions.py` (spec §5.2), with the web list's figures.

The flags are `list_sessions.py`'s (`-n`, `--all`, `--with-db`, `--with-model`, `--with-net`,
`--with-tools`, `--min-cost`) plus the web list's verdict filters. They become the query
parameters of `/-/capsem/sessions.json` and go through the same parser (`index/filters.py`)
and the same rows (`index/listing.py`) over the same index, so the terminal and the page never
disagree on a figure. The index is brought up to date first, as the server's background
refresh does (`--no-refresh` uses it as it is).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from datasette.utils import MultiParams

from datasette_capsem import redaction
from datasette_capsem.catalog import Catalog
from datasette_capsem.cli.common import (
    CliError,
    HomeChoice,
    cache_option,
    home_option,
    settings_from_options,
)
from datasette_capsem.config import Settings
from datasette_capsem.graph.values import json_dumps
from datasette_capsem.index import IndexService, filters
from datasette_capsem.index.listing import SessionTable

DEFAULT_COUNT = 20
# (heading, row -> text, right-aligned)
COLUMNS: tuple[tuple[str, Any, bool], ...] = (
    ("ID", lambda r: r["id"], False),
    ("NAME", lambda r: r["name"] or "", False),
    ("STATUS", lambda r: r["status"] or "", False),
    ("CREATED", lambda r: r["created"] or "", False),
    ("VERDICT", lambda r: _verdict(r["verdict"]), False),
    ("TOKENS", lambda r: _count(r["tokens"]), True),
    ("COST", lambda r: "" if r["cost"] is None else f"${r['cost']:.4f}", True),
    ("REQS", lambda r: _count(r["requests"]), True),
    ("TOOLS", lambda r: _count(r["tool_calls"]), True),
)


def _count(value: Any) -> str:
    return "" if value is None else f"{value:,}"


def _verdict(verdict: dict[str, Any]) -> str:
    """The list's verdict cell: state, with counts; '' when the index has none yet."""
    state = verdict.get("state")
    if state in (None, "pending", "none"):
        return ""
    counts = [
        f"{verdict[k]} {k[:-1] if verdict[k] == 1 else k}"
        for k in ("errors", "warnings")
        if verdict.get(k)
    ]
    stale = " (stale)" if verdict.get("stale") else ""
    return f"{state}{': ' + ', '.join(counts) if counts else ''}{stale}"


def list_sessions(
    settings: Settings, params: list[tuple[str, str]], refresh: bool = True
) -> dict[str, Any]:
    """What `/-/capsem/sessions.json` answers for these parameters (minus the index's
    freshness): {sessions, total, filtered, filters, partial}."""
    catalog = Catalog(settings)
    index = IndexService(settings, catalog)
    if refresh:
        index.refresh()
    table = SessionTable(catalog.database_name)
    snapshot = catalog.snapshot()
    built = table.rows(snapshot, index.snapshot())
    try:
        query = filters.parse_query(MultiParams(params), default_size=DEFAULT_COUNT, max_size=10**9)
    except filters.BadParameter as problem:
        raise CliError(str(problem)) from problem
    rows = filters.apply(table.ordered(built, query.sort, query.descending), query)
    return redaction.redact_tree(
        {
            "sessions": table.full_rows(rows[query.offset : query.offset + query.size]),
            "total": len(snapshot.sessions),
            "filtered": len(rows),
            "filters": query.applied(),
            "partial": None,  # the whole list, always (the web's may be provisional a while)
        }
    )


def table_text(rows: list[dict[str, Any]]) -> str:
    cells = [[str(get(r)) for _, get, _ in COLUMNS] for r in rows]
    headers = [h for h, _, _ in COLUMNS]
    widths = [max(len(x) for x in [h, *(c[i] for c in cells)]) for i, h in enumerate(headers)]

    def line(values: list[str]) -> str:
        return "  ".join(
            v.rjust(w) if right else v.ljust(w)
            for v, w, (_, _, right) in zip(values, widths, COLUMNS, strict=True)
        ).rstrip()

    return "\n".join([line(headers), *(line(c) for c in cells)])


@click.command(name="list")
@click.option(
    "-n",
    "count",
    type=click.IntRange(min=1),
    default=DEFAULT_COUNT,
    show_default=True,
    help="Show at most N sessions, newest first.",
)
@click.option("--all", "every", is_flag=True, help="Include vacuumed sessions.")
@click.option("--with-db", is_flag=True, help="Only sessions with a ledger on disk.")
@click.option("--with-model", is_flag=True, help="Only sessions that used tokens.")
@click.option("--with-net", is_flag=True, help="Only sessions with network requests.")
@click.option("--with-tools", is_flag=True, help="Only sessions with tool calls.")
@click.option("--min-cost", type=float, help="Only sessions that cost at least this many dollars.")
@click.option("--has-errors", is_flag=True, help="Only sessions whose check found an error.")
@click.option("--has-warnings", is_flag=True, help="Only sessions whose check found a warning.")
@click.option("--name", "q", help="Only sessions whose id or name contains this text.")
@click.option("--json", "as_json", is_flag=True, help="Print what /-/capsem/sessions.json does.")
@click.option("--no-refresh", is_flag=True, help="Use the index as it is (no ledger read).")
@home_option
@cache_option
def list_command(
    count: int,
    every: bool,
    with_db: bool,
    with_model: bool,
    with_net: bool,
    with_tools: bool,
    min_cost: float | None,
    has_errors: bool,
    has_warnings: bool,
    q: str | None,
    as_json: bool,
    no_refresh: bool,
    home: HomeChoice,
    cache_dir: Path | None,
) -> None:
    """List sessions, newest first, with list_sessions.py's flags and the web list's figures
    (tokens, cost, requests, tool calls, and the verdict when the index has one)."""
    settings = settings_from_options(home, cache_dir)
    flags = {
        "all": every,
        "with_db": with_db,
        "with_model": with_model,
        "with_net": with_net,
        "with_tools": with_tools,
        "has_errors": has_errors,
        "has_warnings": has_warnings,
    }
    params = [(name, "1") for name, on in flags.items() if on]
    if min_cost is not None:
        params.append(("min_cost", repr(min_cost)))
    if q:
        params.append(("q", q))
    params.append(("_size", str(count)))
    answer = list_sessions(settings, params, refresh=not no_refresh)
    if as_json:
        click.echo(json_dumps(answer, indent=2))
        return
    rows = answer["sessions"]
    if rows:
        click.echo(table_text(rows))
    shown = f"{len(rows)} of {answer['filtered']} sessions"
    if answer["filtered"] != answer["total"]:
        shown += f" matching ({answer['total']} in the home)"
    click.echo(("\n" if rows else "") + shown)
