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
from datasette_capsem.cli.common import (
    CliError,
    HomeChoice,
    cache_option,
    home_option,
    resolve_session,
    settings_from_options,
)
from datasette_capsem.graph.otlp import export_trace, merge
from datasette_capsem.graph.trace_rows import load_trace
from datasette_capsem.ledger.schema import read_schema
from datasette_capsem.readonly import LedgerUnavailable, open_readonly
from datasette_capsem.session import overview

EXIT_NO_LEDGER, EXIT_NO_TRACE = 2, 3
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
    help="Write to this file instead of stdout (what was written is said on stderr).",
)
@home_option
@cache_option
def export_otlp(
    session: str, trace: str | None, output: Path | None, home: HomeChoice, cache_dir: Path | None
) -> None:
    """Print SESSION's traces (an id, display name or id prefix) as OTLP JSON resourceSpans.

    Exits 2 for an unknown or ambiguous session (near matches or the candidates go to stderr),
    a missing home or an output directory that does not exist, 3 for an unknown --trace.
    """
    settings = settings_from_options(home, cache_dir)
    catalog = Catalog(settings)
    if output is not None and not output.parent.is_dir():
        raise CliError(f"cannot write {output}: the directory {output.parent} does not exist")
    found = resolve_session(catalog, session)
    if found.ledger_path is None:
        click.echo(f"session {found.id} has no ledger on disk", err=True)
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
        try:
            output.write_text(text + "\n", encoding="utf-8")
        except OSError as error:
            raise CliError(f"cannot write {output}: {error.strerror or error}") from error
        spans = [
            span
            for resource in document["resourceSpans"]
            for scope in resource["scopeSpans"]
            for span in scope["spans"]
        ]
        traces = len({span["traceId"] for span in spans})
        click.echo(
            f"wrote {len(spans)} spans of {traces} traces of session {found.id} to {output}",
            err=True,
        )
    else:
        click.echo(text)
