"""The masker measured both ways: recall on the credential corpus (every kind x placement x
encoding) and precision on secret-free prose and code. Used by tests/test_mask_corpus.py and
benchmarks/bench_mask.py.

A sample is found when no planted secret can be read in what a viewer is shown, by any
decoding a reader could apply (this module's own decoders, independent of the masker's), and
the masking is visible (a `[redacted:` or `[hidden` marker is in it).
"""

from __future__ import annotations

import base64
import gzip
import html
import inspect
import re
import zlib
from dataclasses import dataclass, field
from urllib.parse import unquote, unquote_plus

from datasette_capsem import redaction
from tests.corpus.encodings import (
    BYTE_ENCODINGS,
    CREDENTIALS,
    TEXT_ENCODINGS,
    brotli,
    clean_texts,
    encode_bytes,
    zstandard,
)

MARKERS = ("[redacted:", "[hidden")
_JSON_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})|\\(.)")


def _json_unescape(text: str) -> str:
    simple = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}
    return _JSON_ESCAPE.sub(
        lambda m: chr(int(m.group(1), 16)) if m.group(1) else simple.get(m.group(2), m.group(2)),
        text,
    )


def readings(text: str) -> set[str]:
    """Every reading of `text` a reader could make by undoing escapes, up to three deep."""
    found = {text}
    frontier = {text}
    for _ in range(3):
        following = set()
        for item in frontier:
            for decode in (_json_unescape, unquote, unquote_plus, html.unescape):
                decoded = decode(item)
                if decoded not in found:
                    following.add(decoded)
        found |= following
        frontier = following
    return found


def _byte_readings(data: bytes) -> set[str]:
    texts = {data.decode("latin-1"), data.decode("utf-8", "replace")}
    for codec in ("utf-16-le", "utf-16", "utf-32-le"):
        texts.add(data.decode(codec, "replace"))
    unpacked = []
    for unpack in (
        gzip.decompress,
        zlib.decompress,
        lambda d: zlib.decompress(d, -15),
        base64.b64decode,
        *([brotli.decompress] if brotli else []),
        *([lambda d: zstandard.ZstdDecompressor().decompress(d)] if zstandard else []),
    ):
        try:
            unpacked.append(unpack(data))
        except Exception:  # noqa: BLE001 - not that encoding
            continue
    for inner in unpacked:
        texts.add(inner.decode("latin-1"))
        for codec in ("utf-16-le", "utf-16", "utf-32-le"):
            texts.add(inner.decode(codec, "replace"))
    return texts


def leaks(shown: str | bytes, secrets: list[str]) -> list[str]:
    texts = _byte_readings(shown) if isinstance(shown, bytes) else {shown}
    every = set()
    for text in texts:
        every |= readings(text)
    return [secret for secret in secrets if any(secret in reading for reading in every)]


def _mask_body(masker, data: bytes, content_type: str) -> bytes:
    if "content_type" in inspect.signature(masker.mask_bytes).parameters:
        return masker.mask_bytes(data, force=True, content_type=content_type)
    return masker.mask_bytes(data, force=True)  # an older masker (a baseline)


@dataclass
class Recall:
    samples: int = 0
    misses: list[tuple[str, str, str, list[str]]] = field(default_factory=list)

    @property
    def percent(self) -> float:
        return 100.0 * (self.samples - len(self.misses)) / max(self.samples, 1)


def recall(masker=redaction) -> Recall:
    """Recall of `masker` (a module with `mask_text` and `mask_bytes`, redaction by default)."""
    result = Recall()
    for row in CREDENTIALS:
        text, secrets = row["text"], row["secrets"]
        for name, encode in TEXT_ENCODINGS.items():
            shown = masker.mask_text(encode(text))
            result.samples += 1
            leaked = leaks(shown, secrets)
            if leaked or not any(marker in shown for marker in MARKERS):
                result.misses.append((row["kind"], row["placement"], name, leaked))
        for name in BYTE_ENCODINGS:
            data, content_type = encode_bytes(name, text)
            shown = _mask_body(masker, data, content_type)
            result.samples += 1
            leaked = leaks(shown, secrets)
            visible = shown.decode("latin-1")
            if leaked or not any(marker in visible for marker in MARKERS):
                result.misses.append((row["kind"], row["placement"], name, leaked))
    return result


@dataclass
class Precision:
    chars: int = 0
    spans: list[tuple[str, str]] = field(default_factory=list)  # (file, what was masked)

    @property
    def per_100kb(self) -> float:
        return len(self.spans) * 100_000 / max(self.chars, 1)


_MARKER = re.compile(r"\[(?:redacted:[a-z0-9-]+|hidden[^\]]*)\]")


def precision(masker=redaction) -> Precision:
    """Masked spans in the clean corpus: the markers the masker added, line by line (a doc
    that quotes a marker, as this project's README does, is not counted for it)."""
    result = Precision()
    for name, text in clean_texts():
        result.chars += len(text)
        masked = masker.mask_text(text)
        if masked == text:
            continue
        for line in masked.splitlines():
            added = len(_MARKER.findall(line))
            if added:
                result.spans.extend([(name, line.strip()[:160])] * added)
        # Markers the text itself held are not the masker's.
        for line in text.splitlines():
            held = len(_MARKER.findall(line))
            for _ in range(held):
                for i, (other, shown) in enumerate(result.spans):
                    if other == name and shown == line.strip()[:160]:
                        del result.spans[i]
                        break
    return result
