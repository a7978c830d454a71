"""What counts as a credential in a Capsem ledger, and how it is kept from actors who may not
see it. One policy, in this module, applied to every surface:

* **Credential carriers** (request/response headers, URL query strings, cookies, registry env,
  substitution values) are hidden whole: the value becomes `HIDDEN`, a visible marker.
* **Free text** (bodies, prompts, reply text, tool arguments and results, commands and their
  output, JSON event fields) is shown with every credential-shaped substring masked
  (`mask_text`): known token formats, `key=value`, `KEY: value`, JSON/YAML fields whose key
  names a secret, URL userinfo, PEM blocks, in raw, JSON-escaped and HTML-escaped text. With the
  plugin setting `hide_free_text: true` free text is hidden whole too.
* **Bytes** are decoded (latin-1, which keeps every byte) and masked before any hex dump.

Where each surface applies it:

* Datasette's own routes: every row a ledger query returns goes through `redact_cell`
  (a row factory installed by `apply_policy`), so JSON in every shape, CSV, HTML and facets see
  the redacted value, decoded, before any encoding. When the actor writes the SQL (`sql=`,
  `_where=`), the secret-bearing columns also read as NULL through a SQLite authorizer: a
  transformation (substr, hex, replace) could otherwise carry a secret past the masker.
* Plugin pages: the data of every page goes through `redact_tree` (views/render.py).
* Every text response of every route: `mask_text` over the whole body, and filesystem paths of
  the Capsem home and the cache are replaced (views/secrets_guard.py), as a last net.
"""

from __future__ import annotations

import contextvars
import hashlib
import re
import sqlite3
import threading
from collections import OrderedDict
from typing import Any

from datasette_capsem.ledger import tables

# Policy for the current request, read by the database layer in its worker thread. HIDE_SQL is
# HIDE for requests that carry the actor's own SQL (`sql=`, `_where=`).
OPEN, MASK, HIDE, HIDE_SQL = "open", "mask", "hide", "hide-sql"
policy: contextvars.ContextVar[str] = contextvars.ContextVar("capsem_secret_policy", default=OPEN)
# The operator's `hide_free_text` setting, for the current request (False for OPEN).
hide_free_text: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "capsem_hide_free_text", default=False
)

HIDDEN = "[hidden: may contain credentials]"

# What a viewer sees of each column is decided once, in the registry of tables
# (ledger/tables.py: shown, carrier, free text, or unclassified). The row factory sees result
# names only, so a name that is a carrier (or free text) in any table is one wherever it is
# met; the SQLite authorizer sees (table, column) and applies the registry exactly.
# Credential carriers: hidden whole.
CARRIER_COLUMNS = tables.names_of_kind(tables.CARRIER)
# Names of SQLite's own results (PRAGMA table_info, sqlite_master) that Datasette reads through
# the same connection: never hidden by name (a free-text column of that name, a file's `name`,
# is hidden by the authorizer instead, `_authorizer`).
META_NAMES = frozenset({"name", "type", "sql", "tbl_name", "cid", "seq"})
# Free text: shown masked (hidden whole with `hide_free_text`).
FREE_TEXT_COLUMNS = tables.names_of_kind(tables.FREE_TEXT) - CARRIER_COLUMNS - META_NAMES
# Names that are also ordinary fields of plugin pages' data (a link's `path`, an error's
# `message`): hidden by name only in rows of Datasette's routes, not in plugin trees.
_GENERIC_FIELDS = frozenset(
    {"path", "label", "detail", "error", "message", "problem", "marker", "failed", "subject",
     "block", "term", "callback", "evidence", "filename", "file_name", "directory"}
)  # fmt: skip
# Plugin-page fields (OTLP attributes, body views) that carry free text under another name.
FREE_TEXT_FIELDS = (FREE_TEXT_COLUMNS - _GENERIC_FIELDS) | {
    "input.value",
    "output.value",
    "tool.parameters",
    "process.command_line",
    "text",
    "data",
    "json",
    "snippet",
}
UNCLASSIFIED_HIDDEN = "[hidden: unclassified column]"
# Secret-bearing columns whose names are SQL keywords. Datasette's table page selects them as
# `[query]`; hidden by the authorizer, SQLite would rename the result column after that text
# and the page would fail. So they are hidden only from the actor's own SQL (the row factory
# hides them on every other query).
KEYWORD_SECRET_COLUMNS = frozenset({"query"})
SECRET_COLUMNS = (CARRIER_COLUMNS | FREE_TEXT_COLUMNS) - KEYWORD_SECRET_COLUMNS
ALL_SECRET_COLUMNS = SECRET_COLUMNS | KEYWORD_SECRET_COLUMNS

# --- the masker ------------------------------------------------------------------------------

# Left edge of a name or token: not inside a word, but right after a JSON escape (`\n`, `\t`,
# `\r`...) and after `_` (`DB_PASSWORD`) it is an edge, where `\b` is not.
_LEFT = r"(?:(?<=\\[nrtfb])|(?<![A-Za-z0-9]))"
# A quote as it appears raw, JSON-escaped (any depth), or HTML-escaped.
_QUOTE = r"(?:\\*[\"']|&#34;|&quot;|&#39;|&#x27;)"
_NOT_REDACTED = r"(?!\[(?:redacted|hidden))"
_HEADER_NAMES = (
    r"authorization|proxy-authorization|x-api-key|api-key|x-goog-api-key|cookie|set-cookie|"
    r"x-auth-token|anthropic-api-key|openai-api-key|x-amz-security-token|private-token"
)
# Words that, as the last part of a key name (`DB_PASSWORD`, `aws_secret_access_key`,
# `X-Amz-Signature`), make the key's value a secret.
_SECRET_WORDS = (
    r"pass|password|passwd|passphrase|pwd|secret|token|api[_-]?key|apikey|auth|"
    r"authorization|credentials?|private[_-]?key|access[_-]?key|secret[_-]?key|signature|sig|"
    r"cookie|session|client[_-]?secret"
)
_KEY = rf"{_LEFT}((?:[A-Za-z0-9]+[_.-])*(?:{_SECRET_WORDS}))(?![A-Za-z0-9_-])"

SECRET_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "private-key",
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----[\s\S]*?"
            r"(?:-----END [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----|$)"
        ),
    ),
    # scheme://user:password@host: the password goes, the user and host stay.
    (
        "userinfo",
        re.compile(
            r"(?i)(\b[a-z][a-z0-9+.-]{1,20}://[^\s/:@\"'<>\\]{1,256}:)[^\s/@\"'<>\\]{1,256}(@)"
        ),
    ),
    ("webhook", re.compile(r"https://hooks\.slack\.com/services/[A-Za-z0-9/_-]{8,}")),
    # "authorization: Bearer abc" header lines and "x-api-key": "abc" fields.
    (
        "header",
        re.compile(
            rf"(?i){_LEFT}({_HEADER_NAMES})({_QUOTE}?\s*[:=]\s*{_QUOTE}?){_NOT_REDACTED}"
            r"[^\r\n\"&<,}\\]{4,}"
        ),
    ),
    (
        "bearer",
        re.compile(rf"(?i){_LEFT}(bearer|basic|token)\s+{_NOT_REDACTED}[A-Za-z0-9._~+/=-]{{8,}}"),
    ),
    (
        "api-key",
        re.compile(
            rf"{_LEFT}(?:sk-(?:ant-|proj-)?[A-Za-z0-9_-]{{16,}}|[sr]k_(?:live|test)_[A-Za-z0-9]{{10,}}"
            r"|AIza[0-9A-Za-z_-]{30,}|(?:AKIA|ASIA)[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{30,}"
            r"|github_pat_[A-Za-z0-9_]{20,}|xox[abposre]-[A-Za-z0-9-]{10,}|glpat-[A-Za-z0-9_-]{16,}"
            r"|hf_[A-Za-z0-9]{20,}|ya29\.[0-9A-Za-z_-]{16,}|hv[sbr]\.[A-Za-z0-9_-]{20,}"
            r"|npm_[A-Za-z0-9]{30,}|sk-or-v1-[0-9a-f]{32,})"
        ),
    ),
    (
        "jwt",
        re.compile(rf"{_LEFT}eyJ[A-Za-z0-9_-]{{8,}}\.eyJ[A-Za-z0-9_-]{{8,}}\.[A-Za-z0-9_-]{{8,}}"),
    ),
    # "password": "p@ss word", DB_PASS='x', {\"token\": \"...\"}: a quoted value, whole.
    (
        "secret-field",
        re.compile(
            rf"(?i){_KEY}({_QUOTE}?\s*[:=]\s*)(?P<q>{_QUOTE}){_NOT_REDACTED}"
            r"(?:(?!(?P=q))[^\r\n]){1,4096}?(?=(?P=q))"
        ),
    ),
    # password=hunter2, KEY: value, sig=abc&...: an unquoted value, to a delimiter.
    (
        "secret-value",
        re.compile(
            rf"(?i){_KEY}({_QUOTE}?[ \t]*[:=][ \t]*){_NOT_REDACTED}(?![{{\[\"'\\]|&#34;|&quot;)"
            r"(?!(?:true|false|null|none)\b|(?:blake3|sha256|sha1|md5):)[^\s\"'&<>,;}\]\\]{3,}"
        ),
    ),
)

# Lower-case substrings without which a pattern cannot match: a pattern runs only when one
# of its triggers is in the text, so most responses cost one lower() and a few `in` tests.
# Words whose presence in a key name (password, DB_PASS, X-Amz-Signature, session_token...) make
# its value a secret: the cheap pre-filter of both key-based patterns.
SECRET_KEY_TRIGGERS = (
    "pass", "pwd", "secret", "token", "key", "auth", "credential", "sig", "cookie", "session",
)  # fmt: skip
TRIGGERS: dict[str, tuple[str, ...]] = {
    "private-key": ("private key",),
    "userinfo": ("://",),
    "webhook": ("hooks.slack.com",),
    "header": ("authorization", "api-key", "cookie", "auth-token", "security-token", "private-t"),
    "bearer": ("bearer", "basic", "token"),
    "api-key": (
        "sk-",
        "sk_",
        "rk_",
        "aiza",
        "akia",
        "asia",
        "ghp_",
        "gho_",
        "ghu_",
        "ghs_",
        "ghr_",
        "github_pat_",
        "xox",
        "glpat-",
        "hf_",
        "ya29.",
        "hvs.",
        "hvb.",
        "hvr.",
        "npm_",
    ),
    "jwt": ("eyj",),
    "secret-field": SECRET_KEY_TRIGGERS,
    "secret-value": SECRET_KEY_TRIGGERS,
}
_KEEPS_PREFIX = {"header": 2, "bearer": 1, "secret-field": 2, "secret-value": 2}


def _replacement(kind: str):
    groups = _KEEPS_PREFIX.get(kind, 0)

    def replace(match: re.Match[str]) -> str:
        if kind == "userinfo":
            return f"{match.group(1)}[redacted:{kind}]{match.group(2)}"
        prefix = "".join(match.group(i) or "" for i in range(1, groups + 1))
        if kind == "bearer":
            prefix += " "
        elif kind == "secret-field":
            prefix += match.group("q")
        return f"{prefix}[redacted:{kind}]"

    return replace


REPLACEMENTS = {kind: _replacement(kind) for kind, _pattern in SECRET_PATTERNS}


# Any trigger of any pattern, in one scan of the lowered text: a text none of them occurs in
# has nothing to mask (no pattern would run), which is most text.
_ANY_TRIGGER = re.compile(
    "|".join(re.escape(t) for t in sorted({t for ts in TRIGGERS.values() for t in ts}))
)


# A necessary condition of the costliest patterns, tested on the lowered text without
# IGNORECASE (several times faster): a secret word ending a key, then `:` or `=`
# (`secret-field`, `secret-value`), and a scheme word before a token (`bearer`). Lowering is
# exactly what IGNORECASE compares for these ASCII patterns, except for the four characters
# that match an ASCII letter under IGNORECASE or lower to one (found by trying every code
# point: U+0130 İ, U+0131 ı, U+017F ſ, U+212A K); a text holding none of them that fails the
# condition has no match of the pattern, so skipping it changes nothing. A text holding one
# runs every pattern as is (tests/test_mask_prefilter.py compares the two on many texts).
_FOLDS_TO_ASCII = re.compile("[\u0130\u0131\u017f\u212a]")
_KEYED = re.compile(rf"(?:{_SECRET_WORDS})(?![a-z0-9_-]){_QUOTE}?\s*[:=]")
PREFILTERS: dict[str, re.Pattern[str]] = {
    "secret-field": _KEYED,
    "secret-value": _KEYED,
    "bearer": re.compile(r"(?:bearer|basic|token)\s+[a-z0-9._~+/=-]{8}"),
}


def _slot(things: list[Any], thing: Any) -> int:
    """The index of the first of `things` that is `thing` (kinds share trigger sets and
    prefilters: a shared one has one slot)."""
    return next(i for i, other in enumerate(things) if other is thing)


_KIND_TRIGGERS = [TRIGGERS[kind] for kind, _pattern in SECRET_PATTERNS]
_KIND_PREFILTERS = [PREFILTERS.get(kind) for kind, _pattern in SECRET_PATTERNS]
# Each pattern with its triggers, prefilter and replacement, and the slots where `mask_text`
# keeps what a scan of the current text found for its trigger set and its prefilter.
_RUNS = tuple(
    (
        pattern,
        TRIGGERS[kind],
        _slot(_KIND_TRIGGERS, TRIGGERS[kind]),
        PREFILTERS.get(kind),
        _slot(_KIND_PREFILTERS, PREFILTERS.get(kind)),
        REPLACEMENTS[kind],
    )
    for kind, pattern in SECRET_PATTERNS
)
_SLOTS = len(SECRET_PATTERNS)


# Triggers of the patterns without a prefilter: a short text holding none of them, in which
# (lowered exactly) no prefilter matches, has no pattern to run (a link of a page holds
# "session" and costs four short scans, not one per pattern).
_UNFILTERED_TRIGGER = re.compile(
    "|".join(
        re.escape(t)
        for t in sorted({t for kind, ts in TRIGGERS.items() if kind not in PREFILTERS for t in ts})
    )
)
_PREFILTER_SET = tuple({id(p): p for p in PREFILTERS.values()}.values())
# Up to this length, one regex scan for every unfiltered trigger beats one `in` per trigger.
SHORT_TEXT = 2048


def _unchanged_short(text: str, lowered: str) -> bool:
    """Whether no pattern can run on `text` (so `mask_text` returns it as it is): no trigger
    of an unfiltered pattern occurs and, lowering being exact, no prefilter matches."""
    return (
        _UNFILTERED_TRIGGER.search(lowered) is None
        and _FOLDS_TO_ASCII.search(text) is None
        and not any(prefilter.search(lowered) for prefilter in _PREFILTER_SET)
    )


def mask_text(text: str) -> str:
    """Replace every credential-shaped substring of `text` with a `[redacted:kind]` marker."""
    lowered = text.lower()
    if _ANY_TRIGGER.search(lowered) is None:
        return text
    if len(text) <= SHORT_TEXT and _unchanged_short(text, lowered):
        return text
    original, exact = text, None
    # What the scans of the current `lowered` found, by slot: a megabyte answer is scanned
    # once per trigger set and prefilter, not once per kind, and lowered again only when a
    # pattern changed it.
    triggered: list[bool | None] = [None] * _SLOTS
    passed: list[bool | None] = [None] * _SLOTS
    for pattern, triggers, trigger_slot, prefilter, prefilter_slot, replace in _RUNS:
        hit = triggered[trigger_slot]
        if hit is None:
            hit = triggered[trigger_slot] = any(trigger in lowered for trigger in triggers)
        if not hit:
            continue
        if prefilter is not None:
            if exact is None:  # lowering is what IGNORECASE compares
                exact = _FOLDS_TO_ASCII.search(original) is None
            if exact:
                hit = passed[prefilter_slot]
                if hit is None:
                    hit = passed[prefilter_slot] = prefilter.search(lowered) is not None
                if not hit:
                    continue
        text, count = pattern.subn(replace, text)
        if count:
            lowered = text.lower()
            triggered, passed = [None] * _SLOTS, [None] * _SLOTS
    return text


# Digests of large texts `mask_text` left unchanged. `mask_text` is a pure function of its
# text, so a text it left alone once it leaves alone again: a large answer served again (a
# masked graph.json, built once per ledger version) is not scanned again.
MEMO_MIN_CHARS = 64 * 1024
MEMO_ENTRIES = 64
_unchanged: OrderedDict[bytes, None] = OrderedDict()
_unchanged_lock = threading.Lock()


def mask_text_memo(text: str) -> str:
    """`mask_text`, remembering the large texts it found nothing to mask in."""
    if len(text) < MEMO_MIN_CHARS:
        return mask_text(text)
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=32).digest()
    with _unchanged_lock:
        if digest in _unchanged:
            _unchanged.move_to_end(digest)
            return text
    masked = mask_text(text)
    if masked == text:
        with _unchanged_lock:
            _unchanged[digest] = None
            while len(_unchanged) > MEMO_ENTRIES:
                _unchanged.popitem(last=False)
    return masked


def remember_unchanged(text: str) -> None:
    """Record that `mask_text` leaves `text` unchanged (known from an earlier run of the same
    code over the same text, e.g. a stored trace answer read back after a restart)."""
    if len(text) < MEMO_MIN_CHARS:
        return
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=32).digest()
    with _unchanged_lock:
        _unchanged[digest] = None
        _unchanged.move_to_end(digest)
        while len(_unchanged) > MEMO_ENTRIES:
            _unchanged.popitem(last=False)


def mask_bytes(data: bytes, *, force: bool = False) -> bytes:
    """`mask_text` over raw bytes (latin-1 keeps every byte), for the current request's
    policy: binary bodies shown as hex are masked before they are encoded."""
    if policy.get() == OPEN and not force:
        return data
    return mask_text(data.decode("latin-1")).encode("latin-1")


# --- one value, one row, one tree -----------------------------------------------------------


def redact_cell(column: str | None, value: Any) -> Any:
    """One value as an actor without `view_secrets` may see it (call only for such actors)."""
    if value is None:
        return None
    name = (column or "").lower()
    if name in CARRIER_COLUMNS:
        return HIDDEN
    if name in FREE_TEXT_COLUMNS and hide_free_text.get():
        return HIDDEN
    if isinstance(value, str):
        masked = mask_cut_text(value) if CUT in value else mask_text(value)
        return masked if type(value) is str or masked == value else type(value)(masked)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return mask_bytes(bytes(value), force=True)
    return value


# Text the pages cut (labels, long cells, previews) says so with "…", at its end or inside a
# label made of cut parts. A credential cut there may be too short for its pattern (`ghp_`
# wants 30 characters after it): each part before a "…" is masked as if it went on as a
# token would (digits, which every token class takes, and for a JWT its missing segments),
# so a token's head is masked as the whole token would be.
CUT = "\u2026"
_CUT_PADS = ("0" * 96, "0" * 16 + ".eyJ" + "0" * 16 + "." + "0" * 16)


def _mask_head(part: str) -> str:
    """A part of a text that was cut at its end, its credential-shaped end masked."""
    for pad in _CUT_PADS:
        masked = mask_text(part + pad)
        if masked.endswith(pad):
            continue  # nothing credential-shaped reached the cut with this continuation
        marker = masked.rfind("[redacted:")  # the end was masked, the padding with it
        if marker >= 0:
            return masked[: masked.index("]", marker) + 1]
    return part


def mask_cut_text(text: str) -> str:
    """`mask_text` of a text holding a cut ("…"): the whole, then each part before a cut."""
    parts = mask_text(text).split(CUT)
    return CUT.join([_mask_head(part) for part in parts[:-1]] + parts[-1:])


def redact_tree(
    data: Any,
    key: str | None = None,
    parent: dict | None = None,
    *,
    masked: dict[str, str] | None = None,
) -> Any:
    """A plugin page's data (dicts, lists, values) with `redact_cell` applied by field name;
    OTLP attributes ({"key": name, "value": {...}}) are redacted by their `key`. `masked`:
    texts already masked (text -> `mask_text` of it, or `mask_cut_text` for a cut one), shared
    by walks of data that repeat the same texts (a trace's tree and picture); it is filled."""
    return _TreePass(hide_free_text.get(), masked).value(data, key, parent)


_BODY_VIEW_KINDS = ("json", "sse", "text", "hex")
_BODY_VIEW_TEXTS = ("text", "events", "hex", "assembled")
# Values `redact_cell` returns as they are when their field is neither a carrier nor hidden
# free text (exact types: a subclass goes through `redact_cell`).
_PLAIN = frozenset({int, float, bool})


def mask_once(masked: dict[str, str], text: str) -> str:
    """`mask_text` of `text` (`mask_cut_text` for a cut one), remembered in `masked`: both are
    pure functions of the text."""
    found = masked.get(text)
    if found is None:
        found = masked[text] = mask_cut_text(text) if CUT in text else mask_text(text)
    return found


class _TreePass:
    """One `redact_tree` walk. A tree of a big trace repeats the same texts (kinds, names,
    models) tens of thousands of times and `mask_text` is a pure function of its text, so each
    distinct text is masked once per walk (or once per shared `masked`); a field name is
    lowered and looked up once. A mapping's strings and numbers are handled in its own loop
    (most of a tree's values: no call per value)."""

    def __init__(self, hide: bool, masked: dict[str, str] | None = None):
        self.hide = hide
        self.masked: dict[str, str] = {} if masked is None else masked
        self.names: dict[str, tuple[bool, bool, bool]] = {}

    def flags(self, key: str) -> tuple[bool, bool, bool]:
        """(carrier, carrier only inside a ledger row, free text) of a field name."""
        flags = self.names.get(key)
        if flags is None:
            name = key.lower()
            flags = self.names[key] = (
                name in CARRIER_COLUMNS,
                name in ("query", "headers"),  # carriers only inside a ledger row
                name in FREE_TEXT_FIELDS,
            )
        return flags

    def hidden(self, data: Any, key: str, parent: dict | None) -> bool:
        """Whether a (non-None) value under field `key` of `parent` is hidden whole: a carrier
        field (`query` and `headers` are also ordinary words in page data, a search query:
        they are carriers inside a ledger row), or free text when it is hidden."""
        carrier, row_only, free = self.flags(key)
        if carrier and (not row_only or {"domain", "method", "path"} & (parent or {}).keys()):
            return True
        return free and self.hide and isinstance(data, (str, bytes))

    def value(self, data: Any, key: str | None, parent: dict | None) -> Any:
        if isinstance(data, dict):
            return self.mapping(data)
        if isinstance(data, (list, tuple)):
            return [self.value(item, key, parent) for item in data]
        if data is None:
            return None
        if key and self.hidden(data, key, parent):
            return HIDDEN
        if type(data) is str:
            return mask_once(self.masked, data)
        return redact_cell(None, data)

    def mapping(self, data: dict) -> dict:
        if "key" in data and "value" in data and isinstance(data["key"], str):
            name = data["key"]
            if name.lower() in CARRIER_COLUMNS or (name in FREE_TEXT_FIELDS and self.hide):
                return {**data, "value": {"stringValue": HIDDEN}}
        if self.hide and data.get("kind") in _BODY_VIEW_KINDS:
            return {
                **{k: v for k, v in data.items() if k not in _BODY_VIEW_TEXTS},
                "kind": "text",
                "text": HIDDEN,
            }
        out = {}
        masked = self.masked
        for k, v in data.items():
            kind = type(v)
            if kind is str or kind in _PLAIN:
                if k and isinstance(k, str) and self.hidden(v, k, data):
                    out[k] = HIDDEN
                elif kind is str:
                    found = masked.get(v)
                    out[k] = mask_once(masked, v) if found is None else found
                else:
                    out[k] = v
            else:
                out[k] = self.value(v, k if isinstance(k, str) else None, data)
        return out


def _redacting_row_factory(cursor: sqlite3.Cursor, row: tuple) -> sqlite3.Row:
    names = [column[0] for column in cursor.description or ()]
    return sqlite3.Row(
        cursor,
        tuple(redact_cell(names[i] if i < len(names) else None, v) for i, v in enumerate(row)),
    )


def _marking_row_factory(marks: dict[str, bool]):
    """`_redacting_row_factory`, and a visible marker for the columns the authorizer hid
    (`marks`: result name -> whether every value is replaced, not only the NULL it reads)."""

    def factory(cursor: sqlite3.Cursor, row: tuple) -> sqlite3.Row:
        names = [column[0] for column in cursor.description or ()]
        values = []
        for i, value in enumerate(row):
            name = names[i] if i < len(names) else None
            always = marks.get(name.lower()) if name else None
            if always is not None and (always or value is None):
                values.append(_hidden_marker(name))
            else:
                values.append(redact_cell(name, value))
        return sqlite3.Row(cursor, tuple(values))

    return factory


def _hidden_marker(name: str) -> str:
    return HIDDEN if name.lower() in FREE_TEXT_COLUMNS or name.lower() in META_NAMES else (
        UNCLASSIFIED_HIDDEN
    )


# --- the SQLite layer ------------------------------------------------------------------------

_PLAIN_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _authorizer(database: str, hidden: frozenset[str], marks: dict[str, bool] | None = None):
    """An authorizer reading every column whose kind (ledger/tables.py) is in `hidden` as
    NULL, so neither a value nor a filter, sort or expression over it reaches the actor; the
    names it hid go to `marks` (the row factory shows a marker for them). A column whose name
    Datasette quotes (a keyword: `[query]`) is not hidden here, since SQLite would rename the
    result after the quoted text: the row factory hides its every value by name instead."""
    kinds: dict[tuple[str, str], str] = {}

    def authorize(action: int, table, column, _db, _trigger) -> int:
        if action != sqlite3.SQLITE_READ or not column or not hidden:
            return sqlite3.SQLITE_OK
        kind = kinds.get((table, column))
        if kind is None:
            kind = kinds[(table, column)] = tables.column_kind(database, table, column)
        if kind not in hidden:
            return sqlite3.SQLITE_OK
        name = column.lower()
        plain = _PLAIN_NAME.match(column) is not None and name not in KEYWORD_SECRET_COLUMNS
        if marks is not None and (kind != tables.CARRIER or name not in CARRIER_COLUMNS):
            marks[name] = marks.get(name, False) or not plain
        return sqlite3.SQLITE_IGNORE if plain else sqlite3.SQLITE_OK

    return authorize


NOT_SHOWN = frozenset({tables.CARRIER, tables.FREE_TEXT, tables.UNCLASSIFIED})


def hidden_kinds(wanted: str, hide: bool) -> frozenset[str]:
    """The column kinds a policy reads as NULL: the actor's own SQL (HIDE_SQL) reads only
    shown columns; Datasette's own SQL (HIDE) no unclassified column, and no free text when
    it is hidden whole (its values are redacted by the row factory, by name)."""
    if wanted == HIDE_SQL:
        return NOT_SHOWN
    if wanted == HIDE:
        return frozenset({tables.UNCLASSIFIED} | ({tables.FREE_TEXT} if hide else set()))
    return frozenset()


def apply_policy(conn: sqlite3.Connection, installed, database: str = "ledger"):
    """Make `conn` enforce the current request's policy; returns the policy now installed.

    `installed` is what the connection enforces already (None for a fresh connection, which
    enforces nothing). Re-installing an authorizer expires every prepared statement, so it
    is done only when the policy changes. Rows are redacted (the row factory) on Datasette's
    routes; plugin pages (MASK) read raw values and redact what they show (`redact_tree`).
    `database`: the kind of file ("ledger", "main", "index"), whose columns the registry
    classifies."""
    wanted = policy.get()
    if wanted == MASK:
        wanted = OPEN  # plugin pages redact their output; their own SQL needs no authorizer
    hide = wanted != OPEN and hide_free_text.get()
    key = (wanted, hide, database)
    if key == installed:
        return installed
    if installed is None and wanted == OPEN:
        conn.row_factory = sqlite3.Row
        return key
    # Not None for OPEN either: setting *an* authorizer makes SQLite re-prepare cached
    # statements, so a statement prepared for a viewer cannot serve an actor who may see
    # its columns (nor the other way round).
    marks: dict[str, bool] = {}
    conn.set_authorizer(_authorizer(database, hidden_kinds(wanted, hide), marks))
    conn.row_factory = _marking_row_factory(marks) if wanted in (HIDE, HIDE_SQL) else sqlite3.Row
    return key


def columns_read(conn: sqlite3.Connection, sql: str, database: str) -> list[tuple[str, str, str]]:
    """(table, column, kind) of every column `sql` reads that is not shown raw, found by
    preparing it (EXPLAIN: nothing runs). The caller re-applies its policy afterwards (the
    connection's authorizer is replaced)."""
    found: dict[tuple[str, str], str] = {}

    def record(action: int, table, column, _db, _trigger) -> int:
        if action == sqlite3.SQLITE_READ and column:
            kind = tables.column_kind(database, table, column)
            if kind != tables.SHOWN:
                found.setdefault((table, column), kind)
        return sqlite3.SQLITE_OK

    conn.set_authorizer(record)
    try:
        conn.execute("EXPLAIN " + sql)
    except (sqlite3.Error, ValueError):
        pass  # a parameter left unbound, or SQL Datasette will refuse itself: prepared anyway
    finally:
        conn.set_authorizer(None)
    return [(table, column, kind) for (table, column), kind in found.items()]
