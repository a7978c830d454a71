"""Making ledger values safe to put in JSON and on a page.

Every string in a ledger may be attacker-controlled: huge, binary, or invalid UTF-8 (spec
§4.1 caps previews at 256 KiB; bodies reach 10 MiB). Pages escape through Jinja and the graph
script draws text with textContent; this module only keeps values bounded and serialisable.
"""

from __future__ import annotations

import re
from typing import Any

CLIP_CHARS = 400
EVENT_ID_RE = re.compile(r"^[0-9a-f]{12}$")
PLACEHOLDER_EVENT_ID = "000000000000"  # tool_calls.event_id default of migrated files


def clip(value: Any, limit: int = CLIP_CHARS) -> Any:
    """A JSON-safe, bounded version of one cell: long text cut, bytes shown as hex."""
    if isinstance(value, bytes):
        shown = value[: limit // 2].hex()
        more = "…" if len(value) > limit // 2 else ""
        return f"0x{shown}{more}"
    if isinstance(value, str) and len(value) > limit:
        return value[:limit] + "…"
    return value


def clip_row(row: dict[str, Any], limit: int = CLIP_CHARS) -> dict[str, Any]:
    """`row` with every cell clipped (in place: rows come fresh from a cursor)."""
    for key, value in row.items():
        if (isinstance(value, str) and len(value) > limit) or isinstance(value, bytes):
            row[key] = clip(value, limit)
    return row


def text(value: Any, limit: int = 80) -> str:
    """A one-line label fragment: never None, never longer than `limit`."""
    if value is None:
        return ""
    shown = clip(value, limit)
    shown = str(shown).replace("\r", " ").replace("\n", " ")
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


def usable_event_id(value: Any) -> bool:
    """An event id that can join rows: well-formed and not the migration placeholder."""
    return (
        isinstance(value, str)
        and bool(EVENT_ID_RE.match(value))
        and value != (PLACEHOLDER_EVENT_ID)
    )


def as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    return None


def as_float(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(str(value))
    except ValueError:
        return None
