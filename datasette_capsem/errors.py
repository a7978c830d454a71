"""The one error type of the plugin's pages, raised by views and rendered in one place.

A view raises `CapsemError` (status, title, message, suggestions) instead of returning an error
page; the `handle_exception` hook (and the ASGI layer, for what it answers itself) renders it
as HTML or JSON through `views.render.error`, as Datasette does for its own `Base400`. A
`Redirect` travels the same way: a view that resolves a name to an id raises it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class CapsemError(Exception):
    """A page that names the problem: a 4xx, never a traceback."""

    status: int
    title: str
    message: str
    suggestions: list[dict[str, Any]] = field(default_factory=list)
    path: str | None = None

    def __str__(self) -> str:
        return f"{self.status} {self.title}: {self.message}"


@dataclass
class Redirect(Exception):
    """Answer with a redirect to `location` (a name in the URL resolved to its session)."""

    location: str


FORBIDDEN_MESSAGE = "You may not view this."


def forbidden() -> CapsemError:
    return CapsemError(403, "Forbidden", FORBIDDEN_MESSAGE)


def bad_parameter(title: str, message: str) -> CapsemError:
    return CapsemError(400, title, message)


def not_found(title: str, message: str, suggestions: list[dict] | None = None) -> CapsemError:
    return CapsemError(404, title, message, list(suggestions or []))


def unreadable(problem: Any, whose: str, suggestions: list[dict] | None = None) -> CapsemError:
    """A Capsem file that cannot be read (a `LedgerUnavailable`): 422, naming the file."""
    copy = ""
    if getattr(problem, "copy_in_progress", False):
        copy = (
            " If a copy or sync is still writing it, this is a copy in progress: no figure is "
            "read from it until it is complete, and the page answers again as soon as it is."
        )
    return CapsemError(
        503 if problem.kind == "copying" else 422,
        "Copy in progress" if problem.kind == "copying" else f"Unreadable ledger ({problem.kind})",
        f"{whose} cannot be read: {problem.detail}.{copy}",
        list(suggestions or []),
        path=str(problem.path),
    )


def no_ledger(session_id: str, suggestions: list[dict] | None = None) -> CapsemError:
    """A session whose directory, and so its ledger, is gone."""
    return not_found(
        "No ledger on disk",
        f"Session {session_id} has no session.db on disk (Capsem deletes the directory of a "
        "stopped ephemeral session; its main.db row remains).",
        suggestions,
    )
