"""`datasette capsem resolve NAME`: the session id behind a display name."""

from __future__ import annotations

import json
from pathlib import Path

import click

from datasette_capsem.catalog import Catalog
from datasette_capsem.catalog.resolve import resolve_name
from datasette_capsem.cli.common import (
    EXIT_AMBIGUOUS,
    EXIT_UNKNOWN_SESSION,
    HomeChoice,
    cache_option,
    echo_also_named,
    echo_candidates,
    echo_unknown,
    home_option,
    settings_from_options,
)


@click.command(name="resolve")
@click.argument("name")
@home_option
@cache_option
@click.option("--json", "as_json", is_flag=True, help="Print {name, id, candidates} as JSON.")
def resolve(name: str, home: HomeChoice, cache_dir: Path | None, as_json: bool) -> None:
    """Print the id of the session called NAME (an id prints itself; a unique id prefix of 8+
    characters prints its id).

    An id wins over a display name another session carries (a note on stderr names that
    session). Exits 2 when no session has that id or name (near matches go to stderr) and when
    several have the name (the candidates are listed), as every command does.
    """
    catalog = Catalog(settings_from_options(home, cache_dir))
    resolution = resolve_name(catalog, name)
    if as_json:
        click.echo(json.dumps(resolution.as_json(), indent=2, default=str))
    elif resolution.id:
        click.echo(resolution.id)
        echo_also_named(name, resolution)
    if resolution.ambiguous and not as_json:
        echo_candidates(name, resolution)
    if not resolution.candidates:
        echo_unknown(catalog, name)
        raise SystemExit(EXIT_UNKNOWN_SESSION)
    if resolution.ambiguous:
        raise SystemExit(EXIT_AMBIGUOUS)
