"""`datasette capsem ...`: the command-line face of the plugin.

Each sub-command lives in its own module of this package and is attached here, so this file
only wires. The modules are loaded when the command line asks for a command (click's lazy
group): a server imports this package for its `register_commands` hook, and what the commands
import (the generator, the OTLP encoder with protobuf and OpenTelemetry: ~4 MB of RSS) is no
part of serving.
"""

from __future__ import annotations

import importlib

import click

# command name -> (module of this package, its click.Command), in the order `--help` lists them
SUBCOMMAND_MODULES: dict[str, tuple[str, str]] = {
    "generate": ("generate", "generate"),
    "demo": ("serve", "demo"),
    "serve": ("serve", "serve"),
    "index": ("index", "index"),
    "list": ("list_sessions", "list_command"),
    "resolve": ("resolve", "resolve"),
    "check": ("check", "check"),
    "export-otlp": ("export_otlp", "export_otlp"),
    "push-otlp": ("push_otlp", "push_otlp"),
    "tail": ("tail", "tail"),
}


def subcommand(name: str) -> click.Command:
    """The command `name`, its module imported now (only this package's own modules)."""
    module, attribute = SUBCOMMAND_MODULES[name]
    return getattr(importlib.import_module(f"{__name__}.{module}"), attribute)


def subcommands() -> tuple[click.Command, ...]:
    return tuple(subcommand(name) for name in SUBCOMMAND_MODULES)


class LazyGroup(click.Group):
    """A group whose sub-commands are imported when named (or listed by `--help`)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(SUBCOMMAND_MODULES)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return subcommand(cmd_name) if cmd_name in SUBCOMMAND_MODULES else None


@click.group(name="capsem", cls=LazyGroup)
def capsem_group() -> None:
    """Explore Capsem session telemetry."""


def register(cli: click.Group) -> None:
    cli.add_command(capsem_group)
