"""`datasette capsem index`: build or refresh the cross-session index, with a progress bar."""

from __future__ import annotations

from pathlib import Path

import click

from datasette_capsem.catalog import Catalog
from datasette_capsem.config import ConfigError, Settings, load_settings
from datasette_capsem.index import IndexService

home_option = click.option(
    "--home",
    type=click.Path(file_okay=False, path_type=Path),
    help="Capsem home (default: $CAPSEM_HOME, then ~/.capsem).",
)
cache_option = click.option(
    "--cache-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Plugin cache (default: $DATASETTE_CAPSEM_CACHE, then ~/.cache/datasette-capsem).",
)


def settings_from_options(home: Path | None, cache_dir: Path | None) -> Settings:
    """The same settings a server with these values in its plugin config would use."""
    config = {}
    if home:
        config["capsem_home"] = str(home)
    if cache_dir:
        config["cache_dir"] = str(cache_dir)
    try:
        return load_settings(config)
    except ConfigError as error:
        raise click.UsageError(str(error)) from error


@click.command(name="index")
@home_option
@cache_option
def index(home: Path | None, cache_dir: Path | None) -> None:
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
