"""The encodings a credential reaches a ledger in, applied to each corpus sample.

Text encodings give a `str` (a cell, a preview, a JSON field); byte encodings give
(`bytes`, content type) as `event_body_blobs` stores a body. `CREDENTIALS` is the corpus of
credentials.jsonl (see make_credentials.py); `clean_texts()` the secret-free corpus the
precision is measured on.
"""

from __future__ import annotations

import base64
import gzip
import html
import json
import sys
import sysconfig
import zlib
from pathlib import Path
from urllib.parse import quote, quote_plus

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
CREDENTIALS = [
    json.loads(line) for line in (HERE / "credentials.jsonl").read_text("utf-8").splitlines()
]

try:
    import brotli
except ImportError:  # pragma: no cover - the corpus says so instead
    brotli = None
try:
    import zstandard
except ImportError:  # pragma: no cover
    zstandard = None


def json_escaped(text: str) -> str:
    """JSON string content as hostile writers emit it: `\\/`, `\\u003d`, `\\u0026`, and every
    `p`, `s` and `k` as `\\u0070`... (so `password`, `secret`, `key` never appear as such)."""
    body = json.dumps(text)[1:-1].replace("/", "\\/")
    for char in "=&<>psk":
        body = body.replace(char, f"\\u{ord(char):04x}")
    return body


def html_escaped(text: str) -> str:
    return html.escape(text, quote=True).replace("=", "&#61;").replace(":", "&#x3a;")


TEXT_ENCODINGS = {
    "raw": lambda text: text,
    "json-escapes": json_escaped,
    "json-escapes-twice": lambda text: json_escaped(json_escaped(text)),
    "url": lambda text: quote(text, safe=""),
    "url-form": lambda text: quote_plus(text, safe=""),
    "html-entities": html_escaped,
}


def _deflate_raw(data: bytes) -> bytes:
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    return compressor.compress(data) + compressor.flush()


BYTE_ENCODINGS = {
    "base64": lambda data: (base64.b64encode(data), "application/json;base64"),
    "utf-16le": lambda text: (text.encode("utf-16-le"), "text/plain; charset=utf-16le"),
    "utf-16-bom": lambda text: (text.encode("utf-16"), "text/plain"),
    "utf-32le": lambda text: (text.encode("utf-32-le"), "text/plain"),
    "gzip": lambda data: (gzip.compress(data, mtime=0), "application/json"),
    "deflate": lambda data: (zlib.compress(data), "application/json"),
    "deflate-raw": lambda data: (_deflate_raw(data), "application/json"),
}
if brotli is not None:
    BYTE_ENCODINGS["brotli"] = lambda data: (brotli.compress(data), "application/json")
if zstandard is not None:
    BYTE_ENCODINGS["zstd"] = lambda data: (
        zstandard.ZstdCompressor().compress(data),
        "application/json",
    )
_TEXT_IN = {"utf-16le", "utf-16-bom", "utf-32le"}


def encode_bytes(name: str, text: str) -> tuple[bytes, str]:
    encode = BYTE_ENCODINGS[name]
    return encode(text) if name in _TEXT_IN else encode(text.encode("utf-8"))


def clean_texts() -> list[tuple[str, str]]:
    """(name, text) of secret-free prose and code: this project's docs and README, Capsem's
    docs (the DDL/spec notes in /work/shared when present) and Python's standard library
    sources, about 1.2 MB in all, always the same files."""
    found: list[tuple[str, str]] = []
    for path in sorted([ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]):
        found.append((str(path.relative_to(ROOT)), path.read_text("utf-8")))
    shared = Path("/work/shared")
    for path in sorted(shared.glob("*.md")) if shared.is_dir() else []:
        found.append((f"shared/{path.name}", path.read_text("utf-8")))
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    # Prose-heavy and code-heavy modules present in every CPython 3.10+.
    for name in (
        "argparse.py",
        "asyncio/base_events.py",
        "calendar.py",
        "collections/__init__.py",
        "configparser.py",
        "csv.py",
        "dataclasses.py",
        "datetime.py",
        "difflib.py",
        "email/message.py",
        "enum.py",
        "fractions.py",
        "ftplib.py",
        "functools.py",
        "http/client.py",
        "http/cookiejar.py",
        "imaplib.py",
        "inspect.py",
        "ipaddress.py",
        "logging/__init__.py",
        "mailbox.py",
        "pathlib.py",
        "pickle.py",
        "poplib.py",
        "pydoc.py",
        "shutil.py",
        "smtplib.py",
        "ssl.py",
        "statistics.py",
        "subprocess.py",
        "tarfile.py",
        "textwrap.py",
        "threading.py",
        "typing.py",
        "urllib/parse.py",
        "urllib/request.py",
        "zipfile.py",
        "getpass.py",
        "netrc.py",
        "hmac.py",
        "secrets.py",
        "base64.py",
        "json/encoder.py",
        "json/decoder.py",
        "html/parser.py",
    ):
        path = stdlib / name
        if path.is_file():
            found.append((f"stdlib/{name}", path.read_text("utf-8", "replace")))
    return found


PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
