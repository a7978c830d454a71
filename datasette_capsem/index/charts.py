"""Chart data for the home page, over the same filtered rows as the session list.

Per-day usage comes from the index's in-memory daily figures (session × day × provider), so a
chart request sums over the filtered sessions without opening any file.

Right after a big home's start the list is not whole yet (index/listing.py, `partial`): the
charts are drawn from what the list holds then, the newest sessions only or the list before
the latest change, and say so (`partial_note`), in their JSON and on the page.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from datasette_capsem.index.service import IndexSnapshot


def sessions_per_day(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Sessions created per UTC day and kind."""
    counts: dict[tuple[str, str], int] = defaultdict(int)
    for row in rows:
        created = row.get("created_at")
        if created:
            counts[(str(created)[:10], row["kind"])] += 1
    return [{"day": day, "kind": kind, "sessions": n} for (day, kind), n in sorted(counts.items())]


def usage_per_day(rows: list[dict[str, Any]], index: IndexSnapshot) -> list[dict[str, Any]]:
    """Tokens (input, output) and recorded cost per UTC day and provider, from the ledgers."""
    totals: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0, 0.0])
    for row in rows:
        for day, provider, input_tokens, output_tokens, cost in index.days_of(row["id"]):
            if not day:
                continue
            bucket = totals[(day, provider)]
            bucket[0] += input_tokens or 0
            bucket[1] += output_tokens or 0
            bucket[2] += cost or 0.0
    return [
        {
            "day": day,
            "provider": provider,
            "input_tokens": inp,
            "output_tokens": out,
            "tokens": inp + out,
            "cost_usd": round(cost, 6),
        }
        for (day, provider), (inp, out, cost) in sorted(totals.items())
    ]


def partial_note(partial: dict[str, Any] | None) -> str | None:
    """What the charts leave out while the list is not whole (`_Built.partial`), or None."""
    if not partial:
        return None
    if partial.get("sessions") is None:
        return "The sessions of this home are still being read: the charts are empty until then."
    if partial.get("shown"):
        return (
            f"Drawn from the newest {partial['shown']:,} of {partial['sessions']:,} sessions "
            "only, while the whole list is being prepared: reload in a few seconds for all."
        )
    return (
        "Drawn from the list before the latest changes to its "
        f"{partial['sessions']:,} sessions, while it is brought up to date."
    )


def answer(rows: list[dict[str, Any]], partial: dict[str, Any] | None) -> dict[str, Any]:
    """A chart's JSON: its rows, and whether they cover only part of the sessions."""
    note = partial_note(partial)
    return {"rows": rows, "partial": note is not None, "covers": partial, "note": note}
