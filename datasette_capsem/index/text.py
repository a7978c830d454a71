"""What full-text search finds: the searchable text of one ledger, masked before it is stored.

Each searchable ledger row becomes one document of the index's FTS5 table: assistant replies
(and thinking), the user prompt of each turn, tool calls (name, arguments, result, error) and
tool results, legacy MCP calls, exec commands and their stderr, audit execs, file paths, HTTP
requests (method, domain, path, the rule and reason), DNS names, and security rule ids,
actions, levels and reasons. Credential carriers (headers, query strings, cookies) are never
read.

**The index is shared by every actor, so its text is always masked** with the one credential
policy (`redaction.mask_text`) before it is stored: a secret is replaced by a
`[redacted:kind]` marker, so no query, prefix or phrase can find, rank or show it, whoever
asks. A document is cut at `MAX_DOC_CHARS` (after masking, so a cut never leaves part of a
secret).

Schema-tolerant as the rest of the index (`extract.Columns`: a column the file lacks reads as
NULL, a table it lacks is skipped), and fork-aware: with `Inherited`, only the fork's own rows
are read, so a row a fork copied from its parent is indexed once, for the parent.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from datasette_capsem.index.extract import Columns, Inherited, render, render_once
from datasette_capsem.ledger.dialect import optional_column
from datasette_capsem.ledger.schema import LedgerSchema
from datasette_capsem.redaction import mask_text
from datasette_capsem.sqlfiles import load_sql

MAX_DOC_CHARS = 8192
# The snippet markers of the search (private-use characters): removed from indexed text, so
# a ledger value can never forge a highlight.
MARK_OPEN, MARK_CLOSE = "\ue000", "\ue001"
UNIX_MS_AT = "strftime('%Y-%m-%dT%H:%M:%fZ', {opt:timestamp_unix_ms} / 1000.0, 'unixepoch')"


@dataclass(frozen=True)
class Source:
    """One ledger table's searchable columns, under one document kind."""

    kind: str
    table: str
    texts: tuple[str, ...]
    at: str = "{opt:timestamp}"  # in the SQL dialect of ledger/dialect.py


SOURCES: tuple[Source, ...] = (
    Source("reply", "model_calls", ("text_content", "thinking_content")),
    Source(
        "tool_call",
        "tool_calls",
        ("tool_name", "server_name", "arguments", "response_preview", "error_message"),
    ),
    Source("tool_result", "tool_responses", ("content_preview",)),
    Source(
        "mcp_call",
        "mcp_calls",
        ("server_name", "tool_name", "request_preview", "response_preview", "error_message"),
    ),
    Source("exec", "exec_events", ("command", "stderr_preview")),
    Source("process", "audit_events", ("exe", "argv")),
    Source("file", "fs_events", ("action", "path")),
    Source(
        "http",
        "net_events",
        ("method", "domain", "path", "decision", "matched_rule", "policy_rule", "policy_reason"),
    ),
    Source(
        "dns",
        "dns_events",
        ("qname", "decision", "matched_rule", "policy_rule", "policy_reason"),
    ),
    Source(
        "security",
        "security_rule_events",
        ("event_type", "rule_id", "rule_action", "detection_level"),
        UNIX_MS_AT,
    ),
    Source(
        "security",
        "security_decision_events",
        ("event_type", "stage", "rule_id", "effective_decision", "reason"),
        UNIX_MS_AT,
    ),
    Source(
        "security",
        "security_ask_events",
        ("event_type", "rule_id", "rule_name", "status", "reason"),
        UNIX_MS_AT,
    ),
)
KINDS: tuple[str, ...] = (
    "reply",
    "prompt",
    *dict.fromkeys(s.kind for s in SOURCES if s.kind != "reply"),
)
# (kind, table, row_id, event_id, trace_id, model_call_id, provider, model, at, body)
TextRow = tuple[str, str, int, Any, Any, Any, Any, Any, Any, str]


def clean(text: str) -> str:
    """Masked, marker-free, bounded text of one document."""
    masked = mask_text(text).replace(MARK_OPEN, " ").replace(MARK_CLOSE, " ")
    return masked[:MAX_DOC_CHARS]


def _text(value: Any) -> str | None:
    if type(value) is str:  # nearly every value: the checks below are for the others
        return value.strip() or None
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray, memoryview)):
        value = bytes(value).decode("utf-8", "replace")
    text = str(value).strip()
    return text or None


def _strings(value: Any) -> list[str]:
    """The text of one message's content in any provider's shape (a string, a list of text
    blocks or parts)."""
    if isinstance(value, str):
        return [value]
    found: list[str] = []
    if isinstance(value, list):
        for block in value:
            if isinstance(block, str):
                found.append(block)
            elif isinstance(block, dict) and block.get("type") in (None, "text", "input_text"):
                text = block.get("text")
                if isinstance(text, str):
                    found.append(text)
    return found


def prompt_of(request_body: Any) -> str | None:
    """The last user text of a model request (Anthropic and OpenAI `messages`, the Responses
    API's `input`, Gemini's `contents`), or None (no user text, or a body that is not JSON,
    e.g. cut at 256 KiB)."""
    text = _text(request_body)
    if not text or not text.startswith("{"):
        return None
    try:
        body = json.loads(text)
    except ValueError:
        return None
    if not isinstance(body, dict):
        return None
    if isinstance(body.get("input"), str):
        return body["input"].strip() or None
    for key in ("messages", "input", "contents"):
        messages = body.get(key)
        if not isinstance(messages, list):
            continue
        for message in reversed(messages):
            if not isinstance(message, dict) or message.get("role") != "user":
                continue
            parts = _strings(message.get("content")) + _strings(message.get("parts"))
            joined = "\n".join(p for p in parts if p.strip())
            if joined:
                return joined
    return None


def _calls(conn: sqlite3.Connection, schema: LedgerSchema) -> dict[int, tuple]:
    if not schema.has("model_calls", "id"):
        return {}
    sql = render("text_model_calls", Columns(schema, "model_calls"), __package__)
    return {row[0]: tuple(row[1:]) for row in conn.execute(sql)}


def read_texts(
    conn: sqlite3.Connection, schema: LedgerSchema, inherited: Inherited | None = None
) -> list[TextRow]:
    """Every searchable document of one ledger (a fork's own rows only, with `inherited`)."""
    found: list[TextRow] = []
    calls = _calls(conn, schema)
    for source in SOURCES:
        if not schema.has(source.table, "id"):
            continue
        prompts_seen: set[tuple] = set()
        texts = slice(7, 7 + len(source.texts))  # the columns of text_rows.sql, in order
        kind, table = source.kind, source.table
        of_calls = table == "model_calls"
        for row in _rows(conn, schema, source, inherited):
            row_id, event_id, trace_id, model_call_id, provider, model, at = row[:7]
            # `_text` of each value, a str (nearly every one) stripped here without a call
            parts = [v.strip() if type(v) is str else _text(v) for v in row[texts]]
            call_id = row_id if of_calls else model_call_id
            call = calls.get(call_id) if call_id is not None else None
            if call is not None:
                provider, model = provider or call[0], model or call[1]
                at = at or call[2]
            common = (event_id, trace_id, call_id, provider, model, at)
            body = "\n".join([p for p in parts if p])
            if body:
                found.append((kind, table, row_id, *common, clean(body)))
            if of_calls:
                prompt = prompt_of(row[texts.stop])  # request_body, after the texts
                key = (trace_id, prompt)
                if prompt and key not in prompts_seen:
                    prompts_seen.add(key)
                    found.append(("prompt", source.table, row_id, *common, clean(prompt)))
    return found


def _rows(
    conn: sqlite3.Connection, schema: LedgerSchema, source: Source, inherited: Inherited | None
) -> list[tuple]:
    """The rows of text_rows.sql for one source, as tuples (by position: no name look-ups)."""
    columns = Columns(schema, source.table, inherited=inherited)
    sql = render_once(("text", source), columns, lambda: _source_sql(source, columns))
    previous = conn.row_factory
    conn.row_factory = None
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.row_factory = previous


def _source_sql(source: Source, columns: Columns) -> str:
    schema, table = columns.schema, source.table
    selects = [
        f"{optional_column(schema, table, name)} AS text{i}" for i, name in enumerate(source.texts)
    ]
    if table == "model_calls":
        selects.append(f"{optional_column(schema, table, 'request_body_preview')} AS request_body")
    at = columns.render(source.at)
    return columns.render(load_sql(__package__, "text_rows"), texts=", ".join(selects), at=at)
