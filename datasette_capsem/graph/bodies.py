"""Request and response bodies from `event_body_blobs`, decoded for reading.

A body is whatever crossed the wire (spec §4.4): JSON, an SSE stream, text, or bytes. Each
gets the view that reads best, never more than `DISPLAY_BYTES` of it at once, and its blake3 is
checked against `body_hash` (`blake3:<64 hex>`), because "if a compact preview and a blob
disagree, the blob table is the ledger" (spec §6.1) and a blob that fails its own hash is not.
The verdict is `ledger.bodies.hash_verdict`, the same function the integrity checks run in SQL.
"""

from __future__ import annotations

from typing import Any

from datasette_capsem import redaction
from datasette_capsem.ledger.bodies import hash_note, hash_verdict
from datasette_capsem.streams import is_sse, json_pretty, sse_events, sse_text

DISPLAY_BYTES = 256 * 1024  # decoded for the page; the rest is behind a raw download
HEX_BYTES = 4096  # binary bodies: hex dump of the first bytes only
# Raster images a page may show, known by their first bytes (never by the stored content type,
# which the agent controls). SVG is not among them: it can carry script, so it stays text.
IMAGE_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def image_type(data: bytes) -> str | None:
    """The media type of a PNG, JPEG, GIF or WebP by its magic bytes, else None."""
    head = bytes(data[:16])
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return next((media for magic, media in IMAGE_MAGIC if head.startswith(magic)), None)


def blob_verdict(meta: dict[str, Any], data: Any | None) -> str | None:
    """The hash verdict of a blob row, or None when its bytes were not read (a truncated
    blob is unverifiable without reading them)."""
    if data is None and not meta.get("truncated"):
        return None
    return hash_verdict(data, meta.get("body_hash"), meta.get("truncated"))


def _media_type(content_type: Any) -> str:
    if not isinstance(content_type, str):
        return ""
    return content_type.split(";", 1)[0].strip().lower()


def _utf8(data: bytes) -> tuple[str, bool]:
    """Text and whether it was valid UTF-8 (invalid bytes become U+FFFD)."""
    try:
        return data.decode("utf-8"), True
    except UnicodeDecodeError:
        return data.decode("utf-8", "replace"), False


def _looks_binary(data: bytes) -> bool:
    sample = data[:2048]
    if b"\x00" in sample:
        return True
    controls = sum(1 for byte in sample if byte < 9 or 13 < byte < 32)
    return bool(sample) and controls / len(sample) > 0.1


def hex_dump(data: bytes, limit: int = HEX_BYTES) -> list[dict[str, Any]]:
    """Offset, hex and printable ASCII per 16-byte line."""
    lines = []
    for offset in range(0, min(len(data), limit), 16):
        chunk = data[offset : offset + 16]
        ascii_text = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append({"offset": offset, "hex": chunk.hex(" "), "ascii": ascii_text})
    return lines


def decode_body(data: Any, content_type: Any, *, limit: int = DISPLAY_BYTES) -> dict[str, Any]:
    """The readable view of one body: `kind` is json, sse, text, hex or empty."""
    if data is None:
        data = b""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")
    data = bytes(data)
    shown = data[:limit]
    view: dict[str, Any] = {
        "bytes": len(data),
        "display_truncated": len(data) > limit,
        "display_bytes": len(shown),
    }
    if not data:
        return {**view, "kind": "empty", "text": ""}
    media = _media_type(content_type)
    image = image_type(data)  # by its bytes, whatever type it claims
    if redaction.policy.get() != redaction.OPEN and not image:
        # A viewer reads what a reader would: a compressed, base64 or UTF-16/32 body decoded
        # (then masked like any text), one that decodes to nothing readable hidden.
        decoded, how = redaction.decode_body_text(shown, content_type)
        if decoded is None:
            return {**view, "kind": "text", "text": redaction.HIDDEN_BODY}
        if how == "decoded":
            shown = decoded.encode("utf-8", "surrogatepass")
            media = "" if "base64" in media else media
    if image or (_looks_binary(shown) and not media.startswith("text/")):
        # A hex dump splits a credential over lines the response masker cannot match.
        shown = redaction.mask_bytes(shown, content_type=content_type)
        return {
            **view,
            "kind": "hex",
            "hex": hex_dump(shown),
            "hex_truncated": len(data) > HEX_BYTES,
            "image": image,
        }
    text, valid = _utf8(shown)
    view["valid_utf8"] = valid
    if is_sse(media, text):
        events = sse_events(text)
        return {**view, "kind": "sse", "events": events, "assembled": sse_text(events)}
    if ("json" in media or text.lstrip()[:1] in ("{", "[")) and not view["display_truncated"]:
        pretty = json_pretty(text)
        if pretty is not None:
            return {**view, "kind": "json", "text": pretty}
    return {**view, "kind": "text", "text": text}


def body_summary(meta: dict[str, Any], data: Any | None) -> dict[str, Any]:
    """Sizes, flags and hash verdict of one blob row (`data` None when not read)."""
    stored = meta.get("stored_bytes")
    original = meta.get("original_bytes")
    length = meta.get("body_length")
    if data is not None:
        length = len(data.encode() if isinstance(data, str) else data)
    summary = {
        "id": meta.get("id"),
        "event_id": meta.get("event_id"),
        "source_table": meta.get("source_table"),
        "direction": meta.get("direction"),
        "content_type": meta.get("content_type"),
        "original_bytes": original,
        "stored_bytes": stored,
        "body_length": length,
        "truncated": bool(meta.get("truncated")),
        "body_hash": meta.get("body_hash"),
        "size_ok": length == stored,
    }
    verdict = blob_verdict(meta, data)
    summary.update(hash_verdict=verdict, hash_note=hash_note(verdict, original))
    return summary
