"""What counts as a secret in a Capsem ledger, and how it is kept from actors who may not see it.

Two layers, both applied only to actors without the `capsem-view-secrets` permission:

* Masking: every text response (HTML, JSON, CSV) has credential-shaped strings replaced by
  ``[redacted]`` markers before it leaves the server, whatever route produced it.
* Hiding: on Datasette's own routes, where the actor controls the SQL (custom SQL, `_where`,
  column filters, sorting), the columns that carry headers, bodies and arguments read as NULL
  through a SQLite authorizer. Otherwise a query could transform a secret past the masker or
  test it character by character in a WHERE clause.
"""

from __future__ import annotations

import contextvars
import re
import sqlite3

# Policy for the current request, read by the database layer in its worker thread. HIDE_SQL is
# HIDE for requests that carry the actor's own SQL (`sql=`, `_where=`).
OPEN, MASK, HIDE, HIDE_SQL = "open", "mask", "hide", "hide-sql"
policy: contextvars.ContextVar[str] = contextvars.ContextVar("capsem_secret_policy", default=OPEN)

# Columns whose content is expected to carry credentials (spec §4.2-§4.4): read as NULL under
# the HIDE policy. Keyed by column name because the same names recur across tables and eras.
SECRET_COLUMNS = frozenset(
    {
        "request_headers",
        "response_headers",
        "request_body_preview",
        "response_body_preview",
        "system_prompt_preview",
        "body",
        "arguments",
        "content",
        "command",
        "argv",
        "stdout_preview",
        "stderr_preview",
        "context_json",
        "event_json",
        "rule_json",
        "text_content",
        "thinking_content",
        "response_preview",
        "content_preview",
        "request_preview",
        "evidence_json",
        "payload_json",
        "detail_json",
        "env",
    }
)
# Secret-bearing columns whose names are SQL keywords. Datasette's table page selects them as
# `[query]`; hidden by the authorizer, SQLite would rename the result column after that text
# and the page would fail. So they are hidden only from the actor's own SQL, and filtering or
# sorting on them is refused (see views/secrets_guard.py).
KEYWORD_SECRET_COLUMNS = frozenset({"query"})
ALL_SECRET_COLUMNS = SECRET_COLUMNS | KEYWORD_SECRET_COLUMNS

_HEADER_NAMES = (
    r"authorization|proxy-authorization|x-api-key|api-key|x-goog-api-key|cookie|set-cookie|"
    r"x-auth-token|anthropic-api-key|openai-api-key"
)
# A quote as it appears raw, JSON-escaped or HTML-escaped; secrets are searched in all three.
_Q = r"(?:\\?[\"']|&#34;|&quot;|&#39;)?"
_VALUE_END = r"[^\s\"'&<,}\\]"
SECRET_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    # "authorization: Bearer abc" header lines and "x-api-key": "abc" fields.
    ("header", re.compile(rf"(?i)\b({_HEADER_NAMES})({_Q}\s*[:=]\s*{_Q})[^\r\n\"&<,}}\\]{{4,}}")),
    ("bearer", re.compile(r"(?i)\b(bearer|basic|token)\s+[A-Za-z0-9._~+/=-]{8,}")),
    (
        "api-key",
        re.compile(
            r"\b(?:sk-(?:ant-|proj-)?[A-Za-z0-9_-]{16,}|AIza[0-9A-Za-z_-]{30,}"
            r"|AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{30,}"
            r"|xox[abprs]-[A-Za-z0-9-]{10,}|glpat-[A-Za-z0-9_-]{16,})"
        ),
    ),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    (
        "private-key",
        re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----"),
    ),
    (
        "secret-field",
        re.compile(
            r"(?i)\b(api[_-]?key|secret|password|passwd|access[_-]?token|refresh[_-]?token|"
            rf"client[_-]?secret|auth[_-]?token)({_Q}\s*[:=]\s*{_Q}){_VALUE_END}{{6,}}"
        ),
    ),
)


# Lower-case substrings without which a pattern cannot match: a pattern runs only when one
# of its triggers is in the text, so most responses cost one lower() and a few `in` tests.
TRIGGERS: dict[str, tuple[str, ...]] = {
    "header": ("authorization", "api-key", "cookie", "auth-token"),
    "bearer": ("bearer", "basic", "token "),
    "api-key": ("sk-", "aiza", "akia", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "xox", "glpat-"),
    "jwt": ("eyj",),
    "private-key": ("private key",),
    "secret-field": ("api_key", "api-key", "apikey", "secret", "passw", "_token", "-token"),
}


def _replacement(kind: str):
    def replace(match: re.Match[str]) -> str:
        if kind == "header":
            prefix = match.group(1) + match.group(2)
        elif kind == "bearer":
            prefix = match.group(1) + " "
        elif kind == "secret-field":
            prefix = match.group(1) + match.group(2)
        else:
            prefix = ""
        return f"{prefix}[redacted:{kind}]"

    return replace


REPLACEMENTS = {kind: _replacement(kind) for kind, _pattern in SECRET_PATTERNS}


def mask_text(text: str) -> str:
    """Replace every credential-shaped substring of `text` with a `[redacted:kind]` marker."""
    lowered = text.lower()
    for kind, pattern in SECRET_PATTERNS:
        if any(trigger in lowered for trigger in TRIGGERS[kind]):
            text = pattern.sub(REPLACEMENTS[kind], text)
    return text


def mask_bytes(data: bytes) -> bytes:
    """`mask_text` over raw bytes (latin-1 keeps every byte), for the current request's
    policy: binary bodies shown as hex are masked before they are encoded."""
    if policy.get() == OPEN:
        return data
    return mask_text(data.decode("latin-1")).encode("latin-1")


def _authorizer(hidden: frozenset[str]):
    def authorize(action: int, _table, column, _db, _trigger) -> int:
        if action == sqlite3.SQLITE_READ and column and column.lower() in hidden:
            return sqlite3.SQLITE_IGNORE
        return sqlite3.SQLITE_OK

    return authorize


AUTHORIZERS = {
    HIDE: _authorizer(SECRET_COLUMNS),
    HIDE_SQL: _authorizer(ALL_SECRET_COLUMNS),
    # Not None: setting *an* authorizer makes SQLite re-prepare cached statements, so a
    # statement prepared under HIDE cannot serve an actor who may see its columns.
    OPEN: _authorizer(frozenset()),
}


def apply_policy(conn: sqlite3.Connection, installed: str | None) -> str:
    """Make `conn` enforce the current request's policy; returns the policy now installed.

    `installed` is what the connection enforces already (None for a fresh connection, which
    enforces nothing). Re-installing an authorizer expires every prepared statement, so it
    is done only when the policy changes."""
    wanted = policy.get()
    if wanted == MASK:
        wanted = OPEN  # plugin pages mask their output; their own SQL needs no authorizer
    if wanted == installed or (installed is None and wanted == OPEN):
        return installed if installed is not None else OPEN
    conn.set_authorizer(AUTHORIZERS.get(wanted, AUTHORIZERS[OPEN]))
    return wanted
