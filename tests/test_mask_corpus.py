"""The masker measured both ways (issue 25), so that it fails both ways.

Recall: every sample of the credential corpus (tests/corpus/: 184 kinds x plain text, JSON,
headers, argv, env x 15 encodings: raw, JSON escapes once and twice, URL, form, HTML entities,
base64 declared by its content type, UTF-16LE, UTF-16 with BOM, UTF-32LE, gzip, zlib, raw
deflate, brotli, zstd) loses every planted secret, read back by any decoding a reader could
apply, and shows a visible marker. Precision: at most one masked span per 100 KB of
secret-free prose and code (this project's docs, Capsem's notes, Python's standard library),
and the phrases the old masker damaged survive. `benchmarks/bench_mask.py` prints both figures.
"""

from __future__ import annotations

import gzip
import json

from datasette_capsem import redaction
from datasette_capsem.graph.bodies import decode_body
from tests.corpus import measure
from tests.corpus.encodings import BYTE_ENCODINGS, CREDENTIALS, TEXT_ENCODINGS, brotli, zstandard


def test_the_corpus_covers_what_the_issue_lists():
    kinds = {row["kind"] for row in CREDENTIALS}
    assert len(kinds) >= 100
    assert {row["placement"] for row in CREDENTIALS} == {"plain", "json", "header", "argv", "env"}
    assert len(TEXT_ENCODINGS) + len(BYTE_ENCODINGS) >= 13
    # brotli and zstd are dependencies of the plugin: their encodings are in the corpus.
    assert brotli is not None and zstandard is not None
    assert {"brotli", "zstd", "gzip", "deflate", "utf-16le", "base64"} <= BYTE_ENCODINGS.keys()


def test_recall_is_total_on_the_corpus():
    result = measure.recall()
    assert result.samples >= 100 * 5 * 13
    assert not result.misses, result.misses[:20]
    assert result.percent == 100.0


def test_precision_on_secret_free_text():
    result = measure.precision()
    assert result.chars >= 1_000_000
    assert result.per_100kb <= 1.0, result.spans


def test_ordinary_words_survive():
    for text in (
        "the basic structure of the module",
        "more token consumption per turn",
        "Basic Authentication is described in RFC 7617.",
        "The session: deletes its checkpoints when stopped.",
        "tokens for the 2026-08-01T00:00:00Z window",
        '{"input_tokens": 1234, "session_id": "ce63b1b9-c406-4536-a585-fdf75605e534"}',
        "password = getpass.getpass()",
        "self.password = password",
        "See `postgres://user:password@host` for the form.",
        '<input type="hidden" name="csrftoken" value="IjE2NGQ0YjA5ZjU3ZGQ3ZmVhMTg2Ig.ZxYz">',
    ):
        assert redaction.mask_text(text) == text


def test_the_measure_fails_when_the_masker_misses():
    """The recall measure sees a leak through an encoding (the test above can fail)."""
    secret = "PlantedPassw0rd!"
    shown = "password%3D" + secret  # URL-encoded, left unmasked
    assert measure.leaks(shown, [secret]) == [secret]
    compressed = gzip.compress(f"PGPASSWORD={secret}".encode())
    assert measure.leaks(compressed, [secret]) == [secret]


def test_a_body_that_cannot_be_decoded_is_hidden():
    noise = bytes((i * 7919 + 13) % 251 for i in range(4096))  # no text in any encoding
    assert redaction.mask_bytes(noise, force=True) == redaction.HIDDEN_BODY.encode()
    image = b"\x89PNG\r\n\x1a\n" + noise  # an image is shown as the bytes it is
    assert redaction.mask_bytes(image, force=True) == image


def test_masking_twice_changes_nothing():
    """Cells are masked, then whole responses again (core_pages/secrets_guard.py): a marker is
    never masked into another shape."""
    for row in CREDENTIALS:
        for encode in TEXT_ENCODINGS.values():
            once = redaction.mask_text(encode(row["text"]))
            assert redaction.mask_text(once) == once, (row["kind"], once)


def test_a_body_page_shows_a_viewer_the_decoded_body_masked():
    """graph/bodies.decode_body, for a reader without view_secrets: a compressed or UTF-16
    body is decoded to its text (then masked like any text), noise is hidden; an operator
    still gets the stored bytes as a hex dump."""
    secret = "PlantedPassw0rd!"
    compressed = gzip.compress(json.dumps({"password": secret}).encode())
    wide = f"PGPASSWORD={secret} psql".encode("utf-16-le")
    noise = bytes((i * 7919 + 13) % 251 for i in range(4096))
    operator = decode_body(compressed, "application/json")
    assert operator["kind"] == "hex"
    token = redaction.policy.set(redaction.MASK)
    try:
        for data in (compressed, wide):
            view = decode_body(data, "application/json")
            assert view["kind"] in ("json", "text"), view["kind"]
            shown = json.dumps(redaction.redact_tree({"view": view}))
            assert secret not in shown and "[redacted:" in shown
        assert decode_body(noise, "application/octet-stream")["text"] == redaction.HIDDEN_BODY
    finally:
        redaction.policy.reset(token)
