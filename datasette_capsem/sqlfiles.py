"""Load SQL kept in `.sql` files beside the module that runs it."""

from __future__ import annotations

from functools import cache
from importlib import resources


@cache
def load_sql(package: str, name: str) -> str:
    """Text of `<package>/sql/<name>.sql`, read once per process."""
    return (
        resources.files(package).joinpath("sql").joinpath(f"{name}.sql").read_text(encoding="utf-8")
    )
