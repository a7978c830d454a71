"""`datasette capsem demo` and `datasette capsem serve`: one command from install to browser."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click
import yaml

from datasette_capsem.cli.common import (
    CliError,
    HomeChoice,
    home_option,
    home_problem,
    labelled_homes_problem,
)
from datasette_capsem.config import PLUGIN_NAME, ConfigError, load_settings
from datasette_capsem.core_pages.lazy_mount import SECURITY_HEADERS
from datasette_capsem.generate import GenerateOptions, generate_home

DEMO_SEED = 7


def _demo_home(sessions: int | None) -> Path:
    """A generated home in the plugin's cache (never in a real Capsem home), built once."""
    cache_root = Path(load_settings({}).cache_dir).parent
    home = cache_root / f"demo-home-{DEMO_SEED}-{sessions or 'default'}"
    if not (home / "manifest.json").exists():
        click.echo(f"Writing demo Capsem home to {home} ...", err=True)
        with click.progressbar(length=1, label="Generating sessions") as bar:

            def progress(done: int, total: int) -> None:
                bar.length = total
                bar.update(done - bar.pos)

            generate_home(
                home,
                GenerateOptions(seed=DEMO_SEED, sessions=sessions, force=True),
                progress=progress,
            )
    return home


def _instance_config(metadata_path: Path | None) -> tuple[dict, dict]:
    """metadata.yml and, beside it, settings.json (as `datasette serve DIR` reads them)."""
    if metadata_path is None:
        return {}, {}
    try:
        metadata = yaml.safe_load(metadata_path.read_text()) or {}
        settings_path = metadata_path.with_name("settings.json")
        settings = json.loads(settings_path.read_text()) if settings_path.exists() else {}
    except (OSError, ValueError, yaml.YAMLError) as error:
        raise click.ClickException(f"cannot read {metadata_path}: {error}") from error
    if not isinstance(metadata, dict) or not isinstance(settings, dict):
        raise click.ClickException(f"{metadata_path}: expected a mapping at the top level")
    return metadata, settings


def _settings_for(metadata: dict):
    try:
        return load_settings((metadata.get("plugins") or {}).get(PLUGIN_NAME))
    except ConfigError as error:
        raise click.ClickException(str(error)) from error


def _with_homes(metadata: dict, homes: HomeChoice) -> dict:
    """metadata.yml with `--home`/`--homes-dir` in place of the home settings it names."""
    if not homes:
        return metadata
    plugins = dict(metadata.get("plugins") or {})
    config = {
        key: value
        for key, value in (plugins.get(PLUGIN_NAME) or {}).items()
        if key not in ("capsem_home", "run_dir", "homes", "homes_dir")
    }
    plugins[PLUGIN_NAME] = {**config, **homes.config()}
    return {**metadata, "plugins": plugins}


# The headers every answer carries (core_pages/lazy_mount.py), for the one answer no ASGI
# layer sees: uvicorn's own 400 to a request it cannot parse, sent before the application is
# called. A text answer with nothing to load: its policy loads nothing.
EARLY_400_HEADERS = (
    *SECURITY_HEADERS,
    (b"content-security-policy", b"default-src 'none'; frame-ancestors 'none'"),
)


def http_protocol():
    """uvicorn's HTTP protocol (httptools when installed, else h11, as uvicorn picks it) whose
    400 to a malformed request carries the security headers: `datasette capsem serve` runs
    it. `datasette serve` cannot (docs/operating.md: the reverse proxy adds them)."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as Base
    except ImportError:
        from uvicorn.protocols.http.h11_impl import H11Protocol as Base

    class GuardedProtocol(Base):
        def send_400_response(self, msg: str) -> None:
            body = msg.encode("ascii", "replace")
            head = [b"HTTP/1.1 400 Bad Request\r\n"]
            for name, value in (
                *EARLY_400_HEADERS,
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode("ascii")),
                (b"connection", b"close"),
            ):
                head.append(name + b": " + value + b"\r\n")
            self.transport.write(b"".join(head) + b"\r\n" + body)
            self.transport.close()

    return GuardedProtocol


def _run_labelled(host: str, port: int, metadata: dict, settings: dict) -> None:
    import uvicorn
    from datasette.app import Datasette

    datasette = Datasette(metadata=metadata, settings=settings)
    click.echo(f"Serving labelled Capsem homes at http://{host}:{port}/", err=True)
    uvicorn.run(datasette.app(), host=host, port=port, log_level="warning", http=http_protocol())


def _run(home: Path, demo: bool, host: str, port: int, metadata: dict, settings: dict) -> None:
    # Imported when serving, not at import time: Datasette loads this plugin (and so this
    # module) while `datasette.app` itself is still being imported.
    import uvicorn
    from datasette.app import Datasette

    metadata = {**metadata, "plugins": dict(metadata.get("plugins") or {})}
    config = dict(metadata["plugins"].get(PLUGIN_NAME) or {})
    metadata["plugins"][PLUGIN_NAME] = {**config, "capsem_home": str(home), "demo": demo}
    datasette = Datasette(metadata=metadata, settings=settings)
    label = "demo data" if demo else "Capsem home"
    click.echo(f"Serving {label} {home} at http://{host}:{port}/", err=True)
    uvicorn.run(datasette.app(), host=host, port=port, log_level="warning", http=http_protocol())


@click.command(name="demo")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("-p", "--port", default=8001, show_default=True, type=int)
@click.option(
    "--sessions",
    type=click.IntRange(min=1),
    default=None,
    help="Generate this many sessions instead of the small default home.",
)
def demo(host: str, port: int, sessions: int | None) -> None:
    """Serve a generated Capsem home, marked as demo data."""
    _run(_demo_home(sessions), True, host, port, {}, {})


@click.command(name="serve")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("-p", "--port", default=8001, show_default=True, type=int)
@click.option(
    "-m",
    "--metadata",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="metadata.yml with instance settings (e.g. the repository's); a settings.json "
    "beside it is read too.",
)
@home_option
def serve(host: str, port: int, metadata: Path | None, home: HomeChoice) -> None:
    """Serve this machine's Capsem home (from --home, metadata.yml, CAPSEM_HOME or
    ~/.capsem), else the demo; a home named that is not there exits 2. Several labelled homes:
    --home LABEL=PATH (repeatable), --homes-dir DIR, or `homes`/`homes_dir` in metadata.yml."""
    instance, settings = _instance_config(metadata)
    instance = _with_homes(instance, home)
    capsem = _settings_for(instance)
    if capsem.labelled:
        problem = labelled_homes_problem(capsem)
        if problem:
            raise CliError(f"no Capsem home: {problem}")
        _run_labelled(host, port, instance, settings)
        return
    chosen_home = bool(home)
    home = capsem.capsem_home
    if (home / "sessions" / "main.db").exists() or (home / "run").is_dir():
        _run(home, False, host, port, instance, settings)
        return
    chosen = (instance.get("plugins") or {}).get(PLUGIN_NAME) or {}
    if chosen_home:
        source = "--home"
    elif chosen.get("capsem_home"):
        source = f"capsem_home in {metadata}"
    elif os.environ.get("CAPSEM_HOME"):
        source = "$CAPSEM_HOME"
    else:  # nothing chosen a home: the documented fallback for a first look
        click.echo(f"No Capsem home at {home}; serving demo data instead.", err=True)
        _run(_demo_home(None), True, host, port, instance, settings)
        return
    problem = home_problem(capsem) or "has no sessions/main.db and no run dir"
    raise CliError(
        f"no Capsem home: {home} (from {source}) {problem}; fix it, or unset it to serve the "
        "demo data"
    )
