"""`datasette capsem resolve NAME`: the session id behind a display name."""

from __future__ import annotations

import json
from pathlib import Path

import click

from datasette_capsem.catalog import Catalog
from datasette_capsem.catalog.resolve import resolve_name
from datasette_capsem.cli.common import (
    HomeChoice,
    cache_option,
    echo_candidates,
    home_option,
    settings_from_options,
)

EXIT_UNKNOWN, EXIT_AMBIGUOUS = 1, 2


@click.command(name="resolve")
@click.argument("name")
@home_option
@cache_option
@click.option("--json", "as_json", is_flag=True, help="Print {name, id, candidates} as JSON.")
def resolve(name: str, home: HomeChoice, cache_dir: Path | None, as_json: bool) -> None:
    """Print the id of the session called NAME (an id prints itself; a unique id prefix of 8+
    characters prints its id).

    Exits 1 when no session has that name (near matches go to stderr) and 2 when several do
    (the candidates are listed).
    """
    catalog = Catalog(settings_from_options(home, cache_dir))
    resolution = resolve_name(catalog, name)
    if as_json:
        click.echo(json.dumps(resolution.as_json(), indent=2, default=str))
    elif resolution.id:
        click.echo(resolution.id)
    if resolution.ambiguous and not as_json:
        echo_candidates(name, resolution)
    if not resolution.candidates:
        near = ", ".join(s.id for s in catalog.near_matches(name)) or "none"
        click.echo(f"unknown session name or id: {name!r} (near: {near})", err=True)
        raise SystemExit(EXIT_UNKNOWN)
    if resolution.ambiguous:
        raise SystemExit(EXIT_AMBIGUOUS)
