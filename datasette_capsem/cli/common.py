"""What every `datasette capsem …` command shares: --home/--homes-dir/--cache-dir, the home
check, and the one way a session argument (id, display name or id prefix) becomes a session.

`--home PATH` names the one home as before; `--home LABEL=PATH` (repeatable) and `--homes-dir
DIR` name labelled homes, whose sessions are addressed `LABEL--ID` (or `LABEL:ID`).

A command that reads a Capsem home never answers "0 sessions" for a home that is not there:
a missing or wrong `--home`, `$CAPSEM_HOME` or default `~/.capsem` exits 2 with one line saying
which was used. A session argument goes through `catalog/resolve.py`, the rule the pages use;
an ambiguous one exits 2 from every command with the candidates on stderr, and so does an
unknown one with its near matches.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from datasette_capsem.catalog import Catalog, Session
from datasette_capsem.catalog.resolve import Resolution, resolve_name
from datasette_capsem.config import (
    ConfigError,
    Settings,
    home_problem,
    label_problem,
    load_settings,
)

EXIT_BAD_HOME = 2
EXIT_AMBIGUOUS = 2
EXIT_UNKNOWN_SESSION = 2  # every command: check, tail, resolve, export-otlp


@dataclass(frozen=True)
class HomeChoice:
    """What `--home` (repeatable) and `--homes-dir` said; false when neither was given."""

    values: tuple[str, ...] = ()
    homes_dir: Path | None = None

    def __bool__(self) -> bool:
        return bool(self.values) or self.homes_dir is not None

    def labelled(self) -> list[tuple[str, str]] | None:
        """(label, path) of each `--home LABEL=PATH`, or None for one plain `--home PATH`."""
        pairs = [_labelled_value(value) for value in self.values]
        if self.homes_dir is None and len(pairs) == 1 and pairs[0] is None:
            return None
        if any(pair is None for pair in pairs):
            raise CliError("with several homes, each --home needs a label: --home LABEL=PATH")
        return pairs  # type: ignore[return-value]

    def config(self) -> dict[str, Any]:
        """The plugin config these options stand for."""
        pairs = self.labelled()
        if pairs is None:
            return {"capsem_home": self.values[0]} if self.values else {}
        config: dict[str, Any] = {
            "homes": [{"label": label, "path": path} for label, path in pairs]
        }
        if self.homes_dir is not None:
            config["homes_dir"] = str(self.homes_dir)
        return config


def _labelled_value(value: str) -> tuple[str, str] | None:
    """`LABEL=PATH` as (label, path); None for a plain path (one with '/' before any '=')."""
    label, equals, path = value.partition("=")
    if not equals or "/" in label:
        return None
    problem = label_problem(label)
    if problem or not path:
        raise CliError(f"--home {value!r}: {problem or 'the path is empty'}")
    return label, path


def home_option(function):
    """`--home PATH` / `--home LABEL=PATH` (repeatable) and `--homes-dir DIR`, given to the
    command as one `home` argument (a `HomeChoice`)."""

    @click.option(
        "--homes-dir",
        type=click.Path(file_okay=False, path_type=Path),
        help="A directory whose child directories are Capsem homes, labelled by folder name.",
    )
    @click.option(
        "--home",
        "home_values",
        multiple=True,
        metavar="[LABEL=]PATH",
        help="Capsem home (default: $CAPSEM_HOME, then ~/.capsem); LABEL=PATH, repeatable, "
        "for several homes.",
    )
    @functools.wraps(function)
    def with_homes(*args, home_values: tuple[str, ...], homes_dir: Path | None, **kwargs):
        return function(*args, home=HomeChoice(tuple(home_values), homes_dir), **kwargs)

    return with_homes


cache_option = click.option(
    "--cache-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Plugin cache (default: $DATASETTE_CAPSEM_CACHE, then ~/.cache/datasette-capsem).",
)


def number_option(flag: str, kind: click.ParamType, default: float, help: str):
    """A numeric option whose --help shows its default (`kind` bounds it, e.g. IntRange)."""
    return click.option(flag, type=kind, default=default, show_default=True, help=help)


class CliError(click.ClickException):
    """A one-line error (no traceback) with its own exit status."""

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(message)
        self.exit_code = exit_code


def home_source(home: HomeChoice | Path | None, environ=os.environ) -> str:
    """Where the home came from, as the error message names it."""
    if home:
        return "--home"
    if environ.get("CAPSEM_HOME"):
        return "$CAPSEM_HOME"
    return "the default ~/.capsem"


def labelled_homes_problem(settings: Settings) -> str | None:
    """Why labelled homes cannot be served: a named home that is not one, a missing homes_dir."""
    for home in settings.homes:
        problem = home_problem(home)
        if problem:
            return f"home {home.label!r}: {home.capsem_home} {problem}"
    if settings.homes_dir is not None and not settings.homes_dir.is_dir():
        return f"homes_dir {settings.homes_dir} is not a directory"
    return None


def settings_from_options(
    home: HomeChoice | Path | None, cache_dir: Path | None, *, require_home: bool = True
) -> Settings:
    """The same settings a server with these values in its plugin config would use; exits 2
    when the home they name is missing or is not a Capsem home."""
    config: dict[str, Any] = {}
    if isinstance(home, HomeChoice):
        config.update(home.config())
    elif home:
        config["capsem_home"] = str(home)
    if cache_dir:
        config["cache_dir"] = str(cache_dir)
    try:
        settings = load_settings(config)
    except ConfigError as error:
        raise CliError(str(error)) from error
    if settings.labelled:
        problem = labelled_homes_problem(settings) if require_home else None
        if problem:
            raise CliError(f"no Capsem home: {problem}", EXIT_BAD_HOME)
        return settings
    problem = home_problem(settings) if require_home else None
    if problem:
        raise CliError(
            f"no Capsem home: {settings.capsem_home} (from {home_source(home)}) {problem}; "
            "give --home or set CAPSEM_HOME (`datasette capsem demo` serves generated data)",
            EXIT_BAD_HOME,
        )
    return settings


def echo_candidates(text: str, resolution: Resolution) -> None:
    """The candidates of an ambiguous id, name or prefix, on stderr, one per line."""
    what = {"prefix": "id prefix", "id": "id"}.get(resolution.candidates[-1]["match"], "name")
    click.echo(
        f"ambiguous: several sessions match the {what} {text!r}; use one of these ids:", err=True
    )
    for found in resolution.candidates:
        home = f"{found['home']}\t" if found.get("home") else ""
        click.echo(
            f"  {found['id']}\t{home}{found['name'] or ''}\t{found['kind']}\t"
            f"{found['created_at'] or ''}",
            err=True,
        )


def echo_also_named(text: str, resolution: Resolution) -> None:
    """When an id won over sessions carrying it as a display name, say which (stderr)."""
    others = [c["id"] for c in resolution.candidates if c["id"] != resolution.id]
    if resolution.id and others:
        click.echo(
            f"note: {text!r} is the id of session {resolution.id} and also the name of "
            f"{', '.join(others)} (an id wins over a name; give that id for the other)",
            err=True,
        )


def echo_unknown(catalog: Catalog, text: str) -> None:
    near = ", ".join(s.id for s in catalog.near_matches(text)) or "none"
    click.echo(f"unknown session name or id: {text!r} (near: {near})", err=True)


def resolve_session(catalog: Catalog, text: str) -> Session:
    """The session `text` names (an id, a display name, or a unique id prefix of 8+
    characters); exits 2 with the candidates when several match, 2 when none."""
    resolution = resolve_name(catalog, text)
    if resolution.id:
        session = catalog.get(resolution.id)
        if session is not None:
            echo_also_named(text, resolution)
            return session
    if resolution.ambiguous:
        echo_candidates(text, resolution)
        raise SystemExit(EXIT_AMBIGUOUS)
    echo_unknown(catalog, text)
    raise SystemExit(EXIT_UNKNOWN_SESSION)
