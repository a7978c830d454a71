"""`datasette capsem ...`: the command-line face of the plugin.

Each sub-command lives in its own module and is attached here, so this file only wires.
"""

from __future__ import annotations

import importlib

import click

# Module name -> the click command attribute(s) it defines. A module that fails to import is a
# bug, so there is no guard.
SUBCOMMANDS: dict[str, str | tuple[str, ...]] = {
    "generate": "generate",
    "serve": ("demo", "serve"),
    "index": "index",
    "resolve": "resolve",
    "check": "check",
    "export_otlp": "export_otlp",
    "push_otlp": "push_otlp",
}


@click.group(name="capsem")
def capsem_group() -> None:
    """Explore Capsem session telemetry."""


def register(cli: click.Group) -> None:
    for module_name, attr in SUBCOMMANDS.items():
        module = importlib.import_module(f"datasette_capsem.cli.{module_name}")
        for name in (attr,) if isinstance(attr, str) else attr:
            capsem_group.add_command(getattr(module, name))
    cli.add_command(capsem_group)
