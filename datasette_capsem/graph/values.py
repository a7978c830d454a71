"""Making ledger values safe to put in JSON and on a page.

Every string in a ledger may be attacker-controlled: huge, binary, or invalid UTF-8 (spec
§4.1 caps previews at 256 KiB; bodies reach 10 MiB). Pages escape through Jinja and the graph
script draws text with textContent; this module only keeps values bounded and serialisable.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from datasette_capsem import redaction

CLIP_CHARS = 400
EVENT_ID_RE = re.compile(r"^[0-9a-f]{12}$")
PLACEHOLDER_EVENT_ID = "000000000000"  # tool_calls.event_id default of migrated files
# Largest magnitude a ledger number may have and still be used as a duration (ms), a cost
# (USD) or an epoch timestamp (ms): 1e15 ms is ~31,700 years. Anything bigger, and NaN or
# infinity, is a broken value, not a measurement.
MAX_MAGNITUDE = 1e15


def clip(value: Any, limit: int = CLIP_CHARS) -> Any:
    """A JSON-safe, bounded version of one cell: long text cut, bytes shown as hex."""
    if isinstance(value, bytes):
        # Decoded and masked before the hex dump: hex hides a credential from the masker.
        value = redaction.mask_bytes(value[: limit // 2 + 4096])[: limit // 2] + value[limit // 2 :]
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
    """A usable number: finite and within `MAX_MAGNITUDE`, else None.

    Ledger cells are typed by whoever wrote them: 'NaN', 'inf', 1e300 or a REAL Infinity
    (9e999) would otherwise reach datetime arithmetic (OverflowError) or JSON (`NaN`,
    `Infinity`, which browsers refuse).
    """
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value) if isinstance(value, (int, float)) else float(str(value))
    except (ValueError, OverflowError):
        return None
    if not math.isfinite(number) or abs(number) > MAX_MAGNITUDE:
        return None
    return number


def json_safe(value: Any) -> Any:
    """`value` with every NaN or infinite float replaced by None, ready for strict JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {
            str(key) if isinstance(key, float) else key: json_safe(item)
            for key, item in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    return value


def json_dumps(value: Any, **options: Any) -> str:
    """Strict JSON text (never the bare tokens NaN or Infinity); `options` go to json.dumps.

    Serialising is tried as is first, so the common, clean document is walked only once.
    """
    options = {"default": str, "ensure_ascii": False, **options, "allow_nan": False}
    try:
        return json.dumps(value, **options)
    except ValueError:
        return json.dumps(json_safe(value), **options)
