"""What every `datasette capsem …` command shares: --home/--cache-dir, the home check, and
the one way a session argument (id, display name or id prefix) becomes a session.

A command that reads a Capsem home never answers "0 sessions" for a home that is not there:
a missing or wrong `--home`, `$CAPSEM_HOME` or default `~/.capsem` exits 2 with one line saying
which was used. A session argument goes through `catalog/resolve.py`, the rule the pages use;
an ambiguous one exits 2 from every command with the candidates on stderr.
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from datasette_capsem.catalog import Catalog, Session
from datasette_capsem.catalog.resolve import Resolution, resolve_name
from datasette_capsem.config import ConfigError, Settings, load_settings

EXIT_BAD_HOME = 2
EXIT_AMBIGUOUS = 2

home_option = click.option(
    "--home",
    type=click.Path(path_type=Path),
    help="Capsem home (default: $CAPSEM_HOME, then ~/.capsem).",
)
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


def home_source(home: Path | None, environ=os.environ) -> str:
    """Where the home came from, as the error message names it."""
    if home:
        return "--home"
    if environ.get("CAPSEM_HOME"):
        return "$CAPSEM_HOME"
    return "the default ~/.capsem"


def home_problem(settings: Settings) -> str | None:
    """Why `settings.capsem_home` is not a Capsem home, or None when it is one: a Capsem home
    holds `sessions/` (main.db, pre-2026 session dirs) or a run dir (`run/`)."""
    home = settings.capsem_home
    if not home.exists():
        return "does not exist"
    if not home.is_dir():
        return "is not a directory"
    if not ((home / "sessions").is_dir() or settings.run_dir.is_dir()):
        return "is not a Capsem home (it has neither sessions/ nor a run dir)"
    return None


def settings_from_options(
    home: Path | None, cache_dir: Path | None, *, require_home: bool = True
) -> Settings:
    """The same settings a server with these values in its plugin config would use; exits 2
    when the home they name is missing or is not a Capsem home."""
    config = {}
    if home:
        config["capsem_home"] = str(home)
    if cache_dir:
        config["cache_dir"] = str(cache_dir)
    try:
        settings = load_settings(config)
    except ConfigError as error:
        raise CliError(str(error)) from error
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
    what = "id prefix" if resolution.candidates[0]["match"] == "prefix" else "name"
    click.echo(f"several sessions match the {what} {text!r}; use one of these ids:", err=True)
    for found in resolution.candidates:
        click.echo(
            f"  {found['id']}\t{found['name'] or ''}\t{found['kind']}\t{found['created_at'] or ''}",
            err=True,
        )


def resolve_session(catalog: Catalog, text: str, unknown_exit: int = 2) -> Session:
    """The session `text` names (an id, a display name, or a unique id prefix of 8+
    characters); exits 2 with the candidates when several match, `unknown_exit` when none."""
    resolution = resolve_name(catalog, text)
    if resolution.id:
        session = catalog.get(resolution.id)
        if session is not None:
            return session
    if resolution.ambiguous:
        echo_candidates(text, resolution)
        raise SystemExit(EXIT_AMBIGUOUS)
    near = ", ".join(s.id for s in catalog.near_matches(text)) or "none"
    click.echo(f"unknown session name or id: {text!r} (near: {near})", err=True)
    raise SystemExit(unknown_exit)
