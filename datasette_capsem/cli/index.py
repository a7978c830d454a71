"""`datasette capsem index`: build or refresh the cross-session index, with a progress bar."""

from __future__ import annotations

from pathlib import Path

import click

from datasette_capsem.catalog import Catalog
from datasette_capsem.cli.common import HomeChoice, cache_option, home_option, settings_from_options
from datasette_capsem.index import IndexService


@click.command(name="index")
@home_option
@cache_option
def index(home: HomeChoice, cache_dir: Path | None) -> None:
    """Read every changed session ledger into the cross-session index."""
    settings = settings_from_options(home, cache_dir)
    service = IndexService(settings, Catalog(settings))
    with click.progressbar(length=1, label="Reading ledgers", show_pos=True) as bar:

        def progress(done: int, total: int) -> None:
            bar.length = max(total, 1)
            bar.update(done - bar.pos)

        report = service.refresh(progress=progress)
    click.echo(
        f"{len(report.indexed)} ledgers read, {report.unchanged} unchanged, "
        f"{len(report.removed)} removed, in {report.seconds:.2f} s -> {service.path}"
    )
    for session_id, problem in sorted(report.problems.items()):
        click.echo(f"  {session_id}: {problem}", err=True)
