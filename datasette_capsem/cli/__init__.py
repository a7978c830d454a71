"""`datasette capsem ...`: the command-line face of the plugin.

Each sub-command lives in its own module and is attached here, so this file only wires.
"""

from __future__ import annotations

import click

from datasette_capsem.cli import (
    check,
    export_otlp,
    generate,
    index,
    list_sessions,
    push_otlp,
    resolve,
    serve,
    tail,
)

SUBCOMMANDS: tuple[click.Command, ...] = (
    generate.generate,
    serve.demo,
    serve.serve,
    index.index,
    list_sessions.list_command,
    resolve.resolve,
    check.check,
    export_otlp.export_otlp,
    push_otlp.push_otlp,
    tail.tail,
)


@click.group(name="capsem")
def capsem_group() -> None:
    """Explore Capsem session telemetry."""


def register(cli: click.Group) -> None:
    for command in SUBCOMMANDS:
        capsem_group.add_command(command)
    cli.add_command(capsem_group)
