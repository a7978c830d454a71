"""Datasette 0.65 answers some malformed parameters with a 500; these become clear 4xx.

Only failures that a request can cause by its parameters are listed; anything else stays an
error for Datasette to report, because it is a bug to fix rather than bad input.
"""

from __future__ import annotations

import json

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
    if isinstance(exception, DatasetteError) and str(exception).startswith("Cannot sort"):
        return 400, "Bad parameter", f"{exception}: _sort and _sort_desc take a column name"
    return None
