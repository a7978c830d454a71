"""Datasette answers some malformed parameters with a 500; these become clear 4xx.

0.65 and 1.0 differ: 1.0 lets a facet on a missing column (`_facet=nope`) raise SQLite's
"no such column" as a 500, where 0.65 answered 400 "Invalid SQL".

Only failures that a request can cause by its parameters are listed; anything else stays an
error for Datasette to report, because it is a bug to fix rather than bad input.
"""

from __future__ import annotations

import json
import sqlite3

from datasette.views.base import DatasetteError


def classify(request, exception: BaseException) -> tuple[int, str, str] | None:
    """(status, title, message) for a bad-input failure of a core page, else None."""
    if request is None:
        return None
    if isinstance(exception, AssertionError) and request.method == "POST":
        return 405, "Method not allowed", "This page only answers GET requests."
    if isinstance(exception, json.JSONDecodeError) and "_through" in request.args:
        return 400, "Bad parameter", "_through must be a JSON object (table, column, value)"
    if isinstance(exception, ValueError):
        value = request.args.get("_timelimit")
        if value is not None and not value.lstrip("-").isdigit():
            return 400, "Bad parameter", "_timelimit must be a whole number of milliseconds"
    if isinstance(exception, DatasetteError) and str(exception).startswith("Invalid _through"):
        return 400, "Bad parameter", f"{exception}: _through names a table whose foreign key "
        "points at this one"
    if isinstance(exception, sqlite3.OperationalError) and _names_a_facet(request, exception):
        return 400, "Bad parameter", f"{exception}: _facet takes a column of this table"
    if isinstance(exception, DatasetteError) and str(exception).startswith("Cannot sort"):
        return 400, "Bad parameter", f"{exception}: _sort and _sort_desc take a column name"
    return None


def _names_a_facet(request, exception: sqlite3.OperationalError) -> bool:
    """SQLite's "no such column: X" (X or inner.X) for a column a `_facet`/`_facet_TYPE`
    parameter names (as its value or inside its JSON form)."""
    message = str(exception)
    if not message.startswith("no such column: "):
        return False
    column = message.removeprefix("no such column: ").removeprefix("inner.")
    return any(
        column in value
        for key in request.args
        if (key == "_facet" or key.startswith("_facet_")) and key != "_facet_size"
        for value in request.args.getlist(key)
    )
