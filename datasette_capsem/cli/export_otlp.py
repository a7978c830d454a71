"""`datasette capsem export-otlp ID [--trace T]`: a session's traces as OTLP JSON.

The output loads into Jaeger, Langfuse or Phoenix (see graph/otlp.py for the attributes). The
ledger is opened through `readonly`, so exporting never writes beside a Capsem file.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import click

from datasette_capsem.catalog import Catalog
from datasette_capsem.catalog.resolve import resolve_name
from datasette_capsem.cli.index import cache_option, home_option, settings_from_options
from datasette_capsem.graph import overview
from datasette_capsem.graph.otlp import export_trace, merge
from datasette_capsem.graph.trace_rows import load_trace
from datasette_capsem.ledger.schema import read_schema
from datasette_capsem.readonly import LedgerUnavailable, open_readonly

EXIT_UNKNOWN, EXIT_NO_LEDGER, EXIT_NO_TRACE = 1, 2, 3
ALL_TRACES = 1_000_000


def _trace_ids(conn: sqlite3.Connection, schema) -> list[str]:
    """Every trace of the session with model calls, oldest first."""
    page = overview.traces_page(conn, schema, 0, ALL_TRACES)
    return [t["trace_id"] for t in reversed(page["traces"])]


def _export(conn: sqlite3.Connection, session_id: str, trace: str | None) -> dict:
    schema = read_schema(conn)
    wanted = [trace] if trace else _trace_ids(conn, schema)
    documents = []
    for trace_id in wanted:
        rows = load_trace(conn, schema, trace_id)
        if rows.empty:
            click.echo(f"no row of session {session_id} carries trace id {trace_id!r}", err=True)
            raise SystemExit(EXIT_NO_TRACE)
        documents.append(export_trace(rows, session_id))
    return merge(documents)


@click.command(name="export-otlp")
@click.argument("session")
@click.option("--trace", "trace", help="Export only this trace id (default: every trace).")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write to this file instead of stdout.",
)
@home_option
@cache_option
def export_otlp(
    session: str, trace: str | None, output: Path | None, home: Path | None, cache_dir: Path | None
) -> None:
    """Print SESSION's traces (an id or display name) as OTLP JSON resourceSpans."""
    settings = settings_from_options(home, cache_dir)
    catalog = Catalog(settings)
    resolution = resolve_name(catalog, session)
    if resolution.id is None:
        problem = "several sessions have that name" if resolution.ambiguous else "unknown session"
        click.echo(f"{problem}: {session!r}", err=True)
        raise SystemExit(EXIT_UNKNOWN)
    found = catalog.get(resolution.id)
    if found is None or found.ledger_path is None:
        click.echo(f"session {resolution.id} has no ledger on disk", err=True)
        raise SystemExit(EXIT_NO_LEDGER)
    try:
        conn = open_readonly(found.ledger_path, settings.cache_dir)
    except LedgerUnavailable as error:
        click.echo(f"cannot read {error.path}: {error.detail}", err=True)
        raise SystemExit(EXIT_NO_LEDGER) from error
    try:
        document = _export(conn, found.id, trace)
    finally:
        conn.close()
    text = json.dumps(document, ensure_ascii=False)
    if output:
        output.write_text(text + "\n", encoding="utf-8")
    else:
        click.echo(text)
