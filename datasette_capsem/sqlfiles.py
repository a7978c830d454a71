"""Load SQL kept in `.sql` files beside the module that runs it.

A line `/* include: NAME */` is replaced by the text of `NAME.sql` from the same folder, so a
rule several queries share (e.g. which tool responses no call could ever pair with) is written
once.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

INCLUDE_RE = re.compile(r"/\* include: ([a-z0-9_]+) \*/")


@cache
def load_sql(package: str, name: str) -> str:
    """Text of `<package>/sql/<name>.sql`, read once per process, with includes expanded."""
    text = resources.files(package).joinpath("sql").joinpath(f"{name}.sql").read_text("utf-8")
    return INCLUDE_RE.sub(lambda match: load_sql(package, match.group(1)).strip(), text)
