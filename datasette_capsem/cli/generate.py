"""`datasette capsem generate DIR`: write a realistic Capsem home (or keep one live)."""

from __future__ import annotations

from pathlib import Path

import click

from datasette_capsem.generate import GenerateError, GenerateOptions, generate_home
from datasette_capsem.generate.home import check_target
from datasette_capsem.generate.live import LiveError, run_live


def _non_negative(ctx: click.Context, param: click.Parameter, value: int | None) -> int | None:
    if value is not None and value < 0:
        raise click.BadParameter("must not be negative")
    return value


@click.command(name="generate")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--seed", type=int, default=1, show_default=True, help="Same seed, same bytes.")
@click.option(
    "--sessions",
    type=int,
    default=None,
    callback=_non_negative,
    help="Add N bulk sessions to the curated home.",
)
@click.option(
    "--traces",
    type=int,
    default=3,
    show_default=True,
    callback=_non_negative,
    help="Traces (user turns) per session.",
)
@click.option(
    "--calls",
    type=int,
    default=3,
    show_default=True,
    callback=_non_negative,
    help="Model calls per trace.",
)
@click.option("--no-defects", is_flag=True, help="Inject no integrity defects.")
@click.option("--no-hostile", is_flag=True, help="Plant no hostile content.")
@click.option("--no-broken", is_flag=True, help="Write no broken files.")
@click.option("--broken-registry", is_flag=True, help="Make persistent_registry.json unparseable.")
@click.option(
    "--old-main-db", is_flag=True, help="main.db in the pre-06-24 shape (total_mcp_calls)."
)
@click.option(
    "--big-session-rows",
    type=int,
    default=0,
    callback=_non_negative,
    help="Add one session of about N rows.",
)
@click.option("--force", is_flag=True, help="Overwrite an existing Capsem home in DIRECTORY.")
@click.option(
    "--live",
    "live_session",
    default=None,
    metavar="SESSION_ID",
    help="Append rows to this session of an existing home until stopped.",
)
@click.option(
    "--rate", type=float, default=20.0, show_default=True, help="Rows per second for --live."
)
@click.option(
    "--duration", type=float, default=None, help="Seconds to run --live (default: until Ctrl-C)."
)
def generate(
    directory: Path,
    seed: int,
    sessions: int | None,
    traces: int,
    calls: int,
    no_defects: bool,
    no_hostile: bool,
    no_broken: bool,
    broken_registry: bool,
    old_main_db: bool,
    big_session_rows: int,
    force: bool,
    live_session: str | None,
    rate: float,
    duration: float | None,
) -> None:
    """Write a realistic Capsem home into DIRECTORY, with manifest.json listing every
    injected defect, hostile value and broken file."""
    if live_session is not None:
        _run_live(directory, live_session, rate, duration, seed)
        return
    options = GenerateOptions(
        seed=seed,
        sessions=sessions,
        traces_per_session=traces,
        calls_per_trace=calls,
        defects=not no_defects,
        hostile=not no_hostile,
        broken=not no_broken,
        force=force,
        big_session_rows=big_session_rows,
        broken_registry=broken_registry,
        old_main_db=old_main_db,
    )
    try:
        options.validate()
        check_target(directory, force)
        with click.progressbar(length=1, label="Writing sessions") as bar:

            def progress(done: int, total: int) -> None:
                bar.length = total
                bar.update(done - bar.pos)

            manifest = generate_home(directory, options, progress)
    except (GenerateError, ValueError) as error:
        raise click.ClickException(str(error)) from error
    click.echo(
        f"Wrote {len(manifest['sessions'])} sessions, {len(manifest['defects'])} defects, {len(manifest['hostile'])} hostile values and {len(manifest['broken_files'])} broken files to {directory}"
    )


def _run_live(
    directory: Path, session_id: str, rate: float, duration: float | None, seed: int
) -> None:
    if rate <= 0:
        raise click.BadParameter("must be positive", param_hint="--rate")
    if duration is not None and duration < 0:
        raise click.BadParameter("must not be negative", param_hint="--duration")
    try:
        written = run_live(directory, session_id, rate=rate, duration=duration, seed=seed)
    except LiveError as error:
        raise click.ClickException(str(error)) from error
    click.echo(f"Appended {written} rows to {session_id}")
