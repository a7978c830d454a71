"""`datasette capsem demo` and `datasette capsem serve`: one command from install to browser."""

from __future__ import annotations

from pathlib import Path

import click

from datasette_capsem.config import PLUGIN_NAME, load_settings

DEMO_SEED = 7


def _demo_home(sessions: int | None) -> Path:
    """A generated home in the plugin's cache (never in a real Capsem home), built once."""
    from datasette_capsem.generate import GenerateOptions, generate_home

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


def _run(home: Path, demo: bool, host: str, port: int, metadata_path: Path | None) -> None:
    import uvicorn
    import yaml
    from datasette.app import Datasette

    metadata = yaml.safe_load(metadata_path.read_text()) if metadata_path else {}
    plugins = metadata.setdefault("plugins", {})
    plugins.setdefault(PLUGIN_NAME, {}).update({"capsem_home": str(home), "demo": demo})
    datasette = Datasette(metadata=metadata)
    label = "demo data" if demo else "Capsem home"
    click.echo(f"Serving {label} {home} at http://{host}:{port}/", err=True)
    uvicorn.run(datasette.app(), host=host, port=port, log_level="warning")


def _default_home() -> Path:
    return load_settings({}).capsem_home


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
    _run(_demo_home(sessions), True, host, port, None)


@click.command(name="serve")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("-p", "--port", default=8001, show_default=True, type=int)
@click.option(
    "-m",
    "--metadata",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="metadata.yml with instance settings (e.g. the repository's).",
)
def serve(host: str, port: int, metadata: Path | None) -> None:
    """Serve this machine's Capsem home (CAPSEM_HOME or ~/.capsem), else the demo."""
    home = _default_home()
    if (home / "sessions" / "main.db").exists() or (home / "run").is_dir():
        _run(home, False, host, port, metadata)
    else:
        click.echo(f"No Capsem home at {home}; serving demo data instead.", err=True)
        _run(_demo_home(None), True, host, port, metadata)
