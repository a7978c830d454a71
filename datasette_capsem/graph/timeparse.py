"""Timestamps as the ledger writes them, turned into numbers a timeline can place.

session.db writes RFC 3339 UTC with 6 or 9 fractional digits (spec §4.1), the security tables
write integer `timestamp_unix_ms`, and main.db whole seconds. Python's `fromisoformat` on 3.10
rejects 9 digits, so this parses the shape by hand and keeps microsecond precision.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone

_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?"
    r"(Z|[+-]\d{2}:?\d{2})?$"
)
# The instants a timestamp may name: what `datetime` can show, years 1 to 9999 (in ns).
MIN_NS = -62_135_596_800 * 1_000_000_000
MAX_NS = 253_402_300_800 * 1_000_000_000 - 1


def sane_ns(nanos: int | None) -> int | None:
    """`nanos` when it is an instant of years 1 to 9999, else None."""
    return nanos if nanos is not None and MIN_NS <= nanos <= MAX_NS else None


def parse_ns(value: object) -> int | None:
    """Nanoseconds since the epoch, exactly (a float of ns would lose the last digits)."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return sane_ns(value * 1_000_000)  # integer milliseconds (the security tables)
    if isinstance(value, float):
        if not math.isfinite(value) or abs(value) > MAX_NS / 1_000_000:
            return None  # NaN, a REAL Infinity (9e999) or 1e300 is no instant
        return sane_ns(int(round(value * 1_000_000)))
    if not isinstance(value, str) or len(value) > 64:
        return None
    match = _RFC3339.match(value.strip())
    if not match:
        return None
    year, month, day, hour, minute, second, fraction, zone = match.groups()
    try:
        moment = datetime(
            int(year),
            int(month),
            int(day),
            int(hour),
            int(minute),
            int(second),
            tzinfo=timezone.utc,
        )
    except ValueError:
        return None
    seconds = int(moment.timestamp()) - int(_zone_offset_ms(zone) // 1000)
    return sane_ns(seconds * 1_000_000_000 + int((fraction or "").ljust(9, "0") or 0))


def parse_ms(value: object) -> float | None:
    """Milliseconds since the epoch (float, µs precision), or None when unparseable."""
    nanos = parse_ns(value)
    if nanos is not None and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)  # already milliseconds: no round trip through ns
    return None if nanos is None else nanos / 1_000_000


def _zone_offset_ms(zone: str | None) -> float:
    if not zone or zone == "Z":
        return 0.0
    sign = -1 if zone[0] == "-" else 1
    digits = zone[1:].replace(":", "")
    return sign * (int(digits[:2]) * 60 + int(digits[2:])) * 60_000.0


def iso_from_ms(millis: float | None) -> str | None:
    """RFC 3339 UTC with microseconds, the way current Capsem writes it; None when `millis`
    is not a number or names no instant of years 1 to 9999 (a start plus a long duration)."""
    if millis is None or isinstance(millis, bool):
        return None
    try:
        moment = datetime.fromtimestamp(float(millis) / 1000.0, tz=timezone.utc)
        return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    except (OverflowError, ValueError, OSError, TypeError):
        return None
