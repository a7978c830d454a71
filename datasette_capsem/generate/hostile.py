"""Agent-controlled content that must never execute or break a page (findings.HOSTILE_KINDS).

Payloads go into every text column an agent or guest controls. Identifiers, timestamps and join
keys stay intact so a hostile session is still clean by every §6.2 check.
"""

from __future__ import annotations

from typing import Any

from datasette_capsem.generate.content import Builder, blake3_ref

PAYLOADS = (
    "<script>window.__pwned=1</script>",
    '"><img src=x onerror="window.__pwned=1">',
    "javascript:window.__pwned=1",
)
# (table, column, row filter) for html payloads; filters pick rows no check depends on.
HTML_TARGETS: tuple[tuple[str, str], ...] = (
    ("tool_calls", "tool_name"),
    ("tool_calls", "arguments"),
    ("tool_calls", "response_preview"),
    ("tool_calls", "server_name"),
    ("tool_calls", "error_message"),
    ("tool_responses", "content_preview"),
    ("model_items", "tool_name"),
    ("model_items", "arguments"),
    ("model_items", "content"),
    ("model_calls", "system_prompt_preview"),
    ("model_calls", "text_content"),
    ("model_calls", "thinking_content"),
    ("model_calls", "message_id"),
    ("net_events", "domain"),
    ("net_events", "path"),
    ("net_events", "query"),
    ("net_events", "request_headers"),
    ("net_events", "response_body_preview"),
    ("net_events", "process_name"),
    ("dns_events", "qname"),
    ("fs_events", "path"),
    ("fs_events", "directory"),
    ("fs_events", "name"),
    ("exec_events", "command"),
    ("exec_events", "stdout_preview"),
    ("exec_events", "stderr_preview"),
    ("audit_events", "exe"),
    ("audit_events", "comm"),
    ("audit_events", "argv"),
    ("audit_events", "cwd"),
    ("security_ask_events", "rule_name"),
    ("security_ask_events", "reason"),
    ("substitution_events", "provider"),
)
HUGE_TEXT_BYTES = 3 * 1024 * 1024
HUGE_BLOB_BYTES = 10 * 1024 * 1024  # MAX_BODY_BLOB_BYTES
INVALID_UTF8 = b"caf\xe9 \xff\xfe <script>window.__pwned=1</script> \xc3\x28"
HostileEntry = dict[str, Any]


def _pick(b: Builder, table: str) -> dict | None:
    """The row to taint: for net_events a non-AI row, so AI-traffic checks stay quiet."""
    rows = b.ledger.rows[table]
    if table == "net_events":
        rows = [r for r in rows if r["credential_ref"] is None]
    if table == "tool_calls":
        rows = [r for r in rows if r["origin"] == "mcp"] or rows
    return rows[-1] if rows else None


def inject(b: Builder, session: str) -> tuple[list[HostileEntry], list[tuple[str, tuple]]]:
    """Taint the built session; returns manifest entries and SQL to run after the insert
    (invalid UTF-8 can only be stored by SQL, Python strings cannot hold it)."""
    entries: list[HostileEntry] = []

    def note(kind: str, table: str, column: str, row_id: int) -> None:
        entries.append(
            {"kind": kind, "session": session, "table": table, "column": column, "row_id": row_id}
        )

    for number, (table, column) in enumerate(HTML_TARGETS):
        row = _pick(b, table)
        if row is None:
            continue
        payload = PAYLOADS[number % len(PAYLOADS)]
        row[column] = (
            f"{payload} {row.get(column) or ''}".strip()
            if column != "domain"
            else f"{payload}.example.com"
        )
        note("html_payload", table, column, row["id"])
    rule = b.ledger.rows["security_rule_events"][-1]
    rule["event_json"] = rule["event_json"][:-1] + f',"note":"{PAYLOADS[0]}"}}'
    note("html_payload", "security_rule_events", "event_json", rule["id"])

    call = b.ledger.rows["model_calls"][0]
    chunk = (
        '{"role":"user","content":"'
        + PAYLOADS[1].replace('"', '\\"')
        + ' lorem ipsum dolor sit amet"},'
    )
    call["request_body_preview"] = ("[" + chunk * (HUGE_TEXT_BYTES // len(chunk) + 1))[
        :HUGE_TEXT_BYTES
    ]
    note("huge_cell", "model_calls", "request_body_preview", call["id"])
    blob = next(r for r in b.ledger.rows["event_body_blobs"] if r["source_table"] == "model_calls")
    body = (b"data: " + PAYLOADS[0].encode() + b" " + b"x" * 1000 + b"\n") * (
        HUGE_BLOB_BYTES // 1040 + 1
    )
    body = body[:HUGE_BLOB_BYTES]
    blob.update(
        body=body,
        stored_bytes=len(body),
        original_bytes=len(body) + 2 * 1024 * 1024,
        truncated=1,
        body_hash=blake3_ref(body + b"x" * (2 * 1024 * 1024)),  # of the original bytes
    )
    b.truncated.append(blob["id"])
    note("huge_cell", "event_body_blobs", "body", blob["id"])

    binary_call = b.ledger.rows["tool_calls"][0]
    binary_call["arguments"] = bytes(range(256))
    note("binary_value", "tool_calls", "arguments", binary_call["id"])
    exec_row = b.ledger.rows["exec_events"][0]
    exec_row["stdout_preview"] = b"\x7fELF\x02\x01\x01\x00" + bytes(64)
    note("binary_value", "exec_events", "stdout_preview", exec_row["id"])

    post: list[tuple[str, tuple]] = []
    for table, column in (
        ("fs_events", "name"),
        ("tool_responses", "content_preview"),
        ("audit_events", "argv"),
    ):
        row = b.ledger.rows[table][0]
        post.append(
            (
                f"UPDATE {table} SET {column} = CAST(? AS TEXT) WHERE id = ?",
                (INVALID_UTF8, row["id"]),
            )
        )
        note("invalid_utf8", table, column, row["id"])
    return entries, post
