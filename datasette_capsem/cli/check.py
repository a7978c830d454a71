"""`datasette capsem check ID_OR_NAME [--json]` and `datasette capsem check --all`.

Unlike Capsem's check_session.py, the exit status carries the verdict, so CI can gate on it:
0 when no error-level finding exists, 1 when one does, 2 when a session cannot be read (an
unknown or ambiguous id, name or prefix, a ledger SQLite rejects, or no Capsem home). With
--all, 2 wins over 1 wins over 0.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from datasette_capsem.catalog import Catalog
from datasette_capsem.checks.model import Report
from datasette_capsem.checks.runner import Outcome, check_all, check_catalog_session
from datasette_capsem.checks.workers import WorkerFailed
from datasette_capsem.cli.common import (
    HomeChoice,
    cache_option,
    home_option,
    resolve_session,
    settings_from_options,
)
from datasette_capsem.config import Settings
from datasette_capsem.readonly import LedgerUnavailable

EXIT_OK, EXIT_ERRORS, EXIT_UNREADABLE = 0, 1, 2


def _table(rows: list[list[str]], header: list[str], numeric: tuple[int, ...] = ()) -> str:
    """Left-aligned text columns; the `numeric` ones right-aligned."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]

    def line(row: list) -> str:
        cells = []
        for i, cell in enumerate(row):
            text = str(cell)
            cells.append(text.rjust(widths[i]) if i in numeric else text.ljust(widths[i]))
        return "  ".join(cells).rstrip()

    return "\n".join([line(header), *(line(r) for r in rows)])


def _exit_for(verdicts: Iterable[str]) -> int:
    seen = set(verdicts)
    if "unreadable" in seen:
        return EXIT_UNREADABLE
    return EXIT_ERRORS if "error" in seen else EXIT_OK


# -- one session ------------------------------------------------------------------------------


def _describe(report: Report, verbose: bool) -> str:
    session = report.session or {}
    head = [
        f"Session {session.get('id')}"
        + (f" ({session['name']})" if session.get("name") else "")
        + f" · {session.get('kind')} · {session.get('status') or 'no main.db row'}"
        + f" · era {report.era}"
        + (" · live" if report.live else ""),
    ]
    counts = report.severity_counts()
    head.append(
        f"Verdict: {report.verdict.upper()} ({counts['error']} error, "
        f"{counts['warning']} warning, {counts['info']} info findings)"
    )
    rows = [
        [f.severity, f.kind, f.table or "", str(f.count), _ids(f.row_ids)] for f in report.problems
    ]
    body = ["", _table(rows, ["SEVERITY", "FINDING", "TABLE", "ROWS", "IDS"], (3,))] if rows else []
    if verbose:
        body += ["", *_explain(report)]
    passed = sum(1 for f in report.findings if f.applicable and not f.problem)
    skipped = [f for f in report.findings if not f.applicable]
    tail = f"{passed} checks passed · {len(skipped)} not applicable to this file"
    return "\n".join([*head, *body, "", tail + ("" if verbose else " (-v for details)")])


def _ids(row_ids: list) -> str:
    shown = ", ".join(str(r) for r in row_ids[:8])
    return shown + (", …" if len(row_ids) > 8 else "")


def _explain(report: Report) -> list[str]:
    lines = []
    for f in report.problems:
        lines.append(f"{f.kind} ({f.table or 'file'}): {f.explanation}")
        lines += [f"    {key}: {text}" for key, text in list(f.details.items())[:10]]
        if f.note:
            lines.append(f"    note: {f.note}")
        if f.failed:
            lines.append(f"    the check could not run: {f.failed}")
    lines += [
        f"not applicable: {f.kind} ({f.table or 'file'}): {f.note}"
        for f in report.findings
        if not f.applicable
    ]
    return lines


def _check_one(settings: Settings, text: str, as_json: bool, verbose: bool, samples: int) -> int:
    catalog = Catalog(settings)
    session = resolve_session(catalog, text)
    try:
        report = check_catalog_session(session, settings, sample_limit=samples, alone=True)
    except LedgerUnavailable as problem:
        outcome = Outcome(session, unreadable=problem)
        if as_json:
            click.echo(json.dumps(outcome.to_dict(), indent=2, default=str))
        click.echo(
            f"cannot read the ledger of {session.id}: {problem.detail} ({problem.path})", err=True
        )
        return EXIT_UNREADABLE
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2, default=str))
    else:
        click.echo(_describe(report, verbose))
    return _exit_for([report.verdict])


# -- every session ----------------------------------------------------------------------------


def _summary_row(outcome: Outcome) -> list[str]:
    session = outcome.session
    if outcome.report is None:
        problem = outcome.unreadable
        detail = f"{problem.kind}: {problem.detail}" if problem else ""
        return [session.id, session.kind, "", "unreadable", "", "", detail]
    report = outcome.report
    counts = report.severity_counts()
    top = Counter(f.kind for f in report.problems if f.severity != "info")
    kinds = ", ".join(kind for kind, _ in top.most_common(3))
    return [
        session.id,
        session.kind,
        report.era,
        report.verdict,
        str(counts["error"]),
        str(counts["warning"]),
        kinds,
    ]


# Most severe first: what --all prints before the rest (catalog order, newest first, within).
VERDICT_ORDER = {"unreadable": 0, "error": 1, "warning": 2, "ok": 3}


@dataclass(frozen=True)
class Rendered:
    """What --all keeps of one session: its verdict and its line (of JSON, or of the table),
    made where it was checked (a worker process) so reports never travel between processes."""

    verdict: str
    line: Any


def _as_json_line(outcome: Outcome) -> Rendered:
    return Rendered(outcome.verdict, json.dumps(outcome.to_dict(), default=str))


def _as_table_row(outcome: Outcome) -> Rendered:
    return Rendered(outcome.verdict, _summary_row(outcome))


def _every_as_json(summary: dict[str, int], lines: list[str]) -> str:
    """{"summary": ..., "sessions": [...]} with one session per line. `indent` would send the
    whole document through json's pure-Python encoder: on 1,000 sessions that took longer
    than running every check; each line here goes through the C encoder."""
    sessions = ",\n".join("    " + line for line in lines)
    head = f'{{\n  "summary": {json.dumps(summary)},\n  "sessions": ['
    return f"{head}\n{sessions}\n  ]\n}}" if sessions else f"{head}]\n}}"


def _check_every(
    settings: Settings, as_json: bool, workers: int, samples: int, problems_only: bool = False
) -> int:
    catalog = Catalog(settings)
    sessions = catalog.sessions()
    done: list[Rendered] = []
    stderr = sys.stderr
    render = _as_json_line if as_json else _as_table_row
    with click.progressbar(
        length=len(sessions), label="Checking sessions", file=stderr, show_pos=True
    ) as bar:
        try:
            for rendered in check_all(
                catalog,
                settings,
                workers=workers,
                sample_limit=samples,
                sessions=sessions,
                render=render,
            ):
                done.append(rendered)
                bar.update(1)
        except WorkerFailed as error:
            raise click.ClickException(str(error)) from error
    verdicts = Counter(r.verdict for r in done)
    shown = sorted(done, key=lambda r: VERDICT_ORDER.get(r.verdict, 9))
    if problems_only:
        shown = [r for r in shown if r.verdict != "ok"]
    if as_json:
        # color=True: nothing to strip (json.dumps escapes control characters), and click's
        # ANSI-stripping pass over tens of MB of JSON would cost seconds.
        click.echo(_every_as_json(dict(verdicts), [r.line for r in shown]), color=True)
    else:
        rows = [r.line for r in shown]
        header = ["SESSION", "KIND", "ERA", "VERDICT", "ERRORS", "WARNINGS", "TOP FINDINGS"]
        if rows:
            click.echo(_table(rows, header, (4, 5)))
        else:
            click.echo("No session has a problem.")
        totals = ", ".join(f"{n} {v}" for v, n in sorted(verdicts.items()))
        hidden = f"; {verdicts['ok']} ok not shown" if problems_only and verdicts["ok"] else ""
        click.echo(f"\n{len(done)} sessions: {totals}{hidden}")
    return _exit_for(verdicts)


@click.command(name="check")
@click.argument("session", required=False)
@click.option("--all", "every", is_flag=True, help="Check every session of the home.")
@click.option("--json", "as_json", is_flag=True, help="Print the report(s) as JSON.")
@click.option(
    "--problems-only",
    is_flag=True,
    help="With --all: list only sessions with a finding (or unreadable).",
)
@click.option(
    "-v", "--verbose", is_flag=True, help="Explain each finding; list what did not apply."
)
@click.option(
    "--samples",
    default=20,
    show_default=True,
    type=click.IntRange(min=1),
    help="Row ids kept per finding.",
)
@click.option(
    "--workers",
    default=2,
    show_default=True,
    type=click.IntRange(min=1),
    help="Processes checking sessions for --all (1: check in this process).",
)
@home_option
@cache_option
def check(
    session: str | None,
    every: bool,
    as_json: bool,
    verbose: bool,
    samples: int,
    workers: int,
    problems_only: bool,
    home: HomeChoice,
    cache_dir: Path | None,
) -> None:
    """Check the integrity of session ID_OR_NAME (or of every session with --all, most
    severe first; --problems-only leaves out the sessions that passed).

    Exit status: 0 no error-level finding, 1 at least one, 2 a session cannot be read (or is
    unknown, or several match: the candidates go to stderr).
    """
    if every == bool(session):
        raise click.UsageError("give one session id or name, or --all")
    if problems_only and not every:
        raise click.UsageError("--problems-only goes with --all")
    settings = settings_from_options(home, cache_dir)
    if every:
        status = _check_every(settings, as_json, workers, samples, problems_only)
    else:
        status = _check_one(settings, session, as_json, verbose, samples)
    sys.exit(status)
