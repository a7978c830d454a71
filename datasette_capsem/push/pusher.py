"""Stream every session's traces to an OTLP/HTTP receiver, sending only what it lacks.

One pass reads the catalog, and for each ledger (opened by `readonly`) compares what
`state.DeliveryState` says was delivered:

1. the ledger file's signature (size, mtime, WAL) unchanged since the session was complete:
   skip the file;
2. else per Capsem trace id, a fingerprint of its rows (`push_fingerprint*.sql`: row count,
   last rowid, exec completion fields, per table) unchanged: skip the trace;
3. else export the trace exactly as `export-otlp` does (`graph/otlp.py`, so the ambient trace
   is one trace per model call plus one for its other rows), add the `capsem.home` resource
   attribute, mask credentials (`redaction.redact_tree`, the masking of every page) unless
   unmasked, and queue every span whose digest differs from the one delivered.

Each session's spans go under its own session id. A fork's ledger starts with its parent's
rows (spec §1.3): those spans are the parent's, the same spans, sent once (counted as
`shared`). Any other session whose ledger carries a trace id another session already sent —
a copy of a ledger in a second dir, e.g. a legacy 0.x `session.db` and a gzip of it under
another id: Capsem's vacuum replaces a dir's `session.db` by its `.gz`, it never writes a
second dir (spec §1.3, §3.7) — is another session by its dir, and its traces are sent under
OTLP trace ids of their own (`export_trace(scope=session id)`), so a trace store keeps both.
Which session sends a Capsem trace id under its plain OTLP id is recorded (`claims`).

Queued spans go out in batches of at most `batch_spans`; the state is written after each
acknowledged batch, a trace's fingerprint once all its spans are acknowledged, a session's
signature once all its traces are.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from datasette_capsem import redaction
from datasette_capsem.catalog import Catalog
from datasette_capsem.config import Settings
from datasette_capsem.graph import ledgersql as lsql
from datasette_capsem.graph.otlp import SCOPE, export_trace
from datasette_capsem.graph.trace_rows import SECURITY_TABLES, TRACE_TABLES, load_trace
from datasette_capsem.index.plan import plan_files
from datasette_capsem.ledger.schema import read_schema
from datasette_capsem.push.encode import encode
from datasette_capsem.push.state import DeliveryState
from datasette_capsem.push.transport import Refused, Sender, Unreachable
from datasette_capsem.readonly import LedgerUnavailable, connect, inspect_file

# Tables whose trace ids name the traces of a file (what load_trace reads rows of).
TRACE_KEY_TABLES = ("model_calls", "tool_calls", *TRACE_TABLES)
# Tables whose rows change what a trace exports, for its fingerprint.
FINGERPRINT_TABLES = (*TRACE_KEY_TABLES, "tool_responses", *SECURITY_TABLES)
FORMAT_VERSION = 3  # bump when the exported shape changes: every trace is then read again
# 2: span ids include the trace id (unique across traces, as Phoenix needs)
# 3: a session carrying another's trace ids, not its fork, sends them under its own OTLP ids
#    (spans whose digest is unchanged are still not sent again)


class StopPush(Exception):
    """The receiver refused a batch (`refused`: not retryable) or stayed unreachable."""

    def __init__(self, message: str, refused: bool):
        self.refused = refused
        super().__init__(message)


@dataclass
class Summary:
    sessions_read: int = 0
    sessions_unchanged: int = 0
    sessions_without_ledger: int = 0
    unreadable: dict[str, str] = field(default_factory=dict)
    traces_sent: int = 0
    traces_skipped: int = 0
    traces_shared: int = 0  # all of its spans queued earlier this run, by another session
    traces_failed: int = 0
    spans_sent: int = 0
    spans_skipped: int = 0
    spans_shared: int = 0  # the same span queued earlier this run (a fork's copied rows)
    spans_failed: int = 0
    spans_rejected: int = 0
    requests: int = 0
    retries: int = 0
    passes: int = 0
    stopped: str | None = None

    @property
    def failed(self) -> bool:
        return bool(
            self.traces_failed or self.spans_failed or self.spans_rejected or self.unreadable
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "sessions": {
                "read": self.sessions_read,
                "unchanged": self.sessions_unchanged,
                "without_ledger": self.sessions_without_ledger,
                "unreadable": len(self.unreadable),
            },
            "traces": {
                "sent": self.traces_sent,
                "skipped": self.traces_skipped,
                "shared": self.traces_shared,
                "failed": self.traces_failed,
            },
            "spans": {
                "sent": self.spans_sent,
                "skipped": self.spans_skipped,
                "shared": self.spans_shared,
                "failed": self.spans_failed,
                "rejected": self.spans_rejected,
            },
            "requests": self.requests,
            "retries": self.retries,
            "passes": self.passes,
        }


@dataclass
class _Trace:
    """A Capsem trace queued for delivery: recorded once none of its spans is outstanding."""

    session: _Session
    trace_id: str
    fingerprint: str
    spans: int
    outstanding: int = 0
    failed: bool = False


@dataclass
class _Session:
    session_id: str
    signature: str
    home_label: str  # the `capsem.home` resource attribute of its spans
    traces: int = 0
    spans: int = 0
    outstanding: int = 0  # traces not yet recorded
    failed: bool = False
    listed: bool = False  # every trace of the file has been queued


@dataclass
class _Item:
    resource_key: str
    resource: dict[str, Any]
    span: dict[str, Any]
    digest: str
    owner: _Trace


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


SESSION_KEYS = frozenset({"session.id", "capsem.session.id"})


def _without_session(attributes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Attributes but the session id: what makes a span copied into a fork the same span."""
    return [a for a in attributes if a.get("key") not in SESSION_KEYS]


def trace_fingerprints(conn, schema, salt: str) -> dict[str, str]:
    """Capsem trace id -> fingerprint of the rows its export reads, for every trace of the file."""
    per_trace: dict[str, list] = {}
    shared: list = []
    keys: set[str] = set()
    for table in FINGERPRINT_TABLES:
        if table not in schema.tables:
            continue
        if table == "exec_events" and schema.has(table, "trace_id", "exit_code", "duration_ms"):
            rows = lsql.run(conn, "push_fingerprint_exec")
        elif schema.has(table, "trace_id"):
            rows = lsql.run(conn, "push_fingerprint", table=table)
        else:
            rows = lsql.run(conn, "push_fingerprint_untagged", table=table)
        for row in rows:
            part = [table, row["n"], row["last_rowid"], row["done"], row["ms"]]
            trace_id = row["trace_id"]
            if trace_id is None:
                shared.append(part)
                continue
            trace_id = str(trace_id)
            per_trace.setdefault(trace_id, []).append(part)
            if table in TRACE_KEY_TABLES and trace_id:
                keys.add(trace_id)
    return {t: _digest([salt, sorted(per_trace[t], key=str), shared]) for t in sorted(keys)}


def fork_roots(sessions: dict) -> dict[str, str]:
    """Session id -> the session its rows descend from: through the id owning its file (one VM
    under two ids) and its fork parents (registry or main.db, as the index reads them)."""
    plan = plan_files(sessions)
    roots = {}
    for session_id in sessions:
        current, seen = plan.aliases.get(session_id, session_id), set()
        while current in plan.parents and current not in seen:
            seen.add(current)
            current = plan.parents[current].session_id
        roots[session_id] = current
    return roots


def file_signature(path: Path, salt: str) -> str:
    state = inspect_file(path)
    return _digest([salt, str(path), *state.fingerprint])


class Pusher:
    def __init__(
        self,
        settings: Settings,
        state: DeliveryState,
        sender: Sender,
        *,
        content_type: str,
        home_label: str,
        masked: bool = True,
        batch_spans: int = 500,
        progress: Callable[[str], None] | None = None,
        progress_every: float = 2.0,
    ):
        self.settings = settings
        self.catalog = Catalog(settings)
        self.state = state
        self.sender = sender
        self.content_type = content_type
        self.home_label = home_label
        self.masked = masked
        self.batch_spans = max(1, batch_spans)
        self.progress = progress
        self.progress_every = progress_every
        self.summary = Summary()
        self.salt = _digest([FORMAT_VERSION, SCOPE, home_label, masked])
        self.queue: list[_Item] = []
        self.queued: dict[tuple[str, str], str] = {}  # (trace, span) -> digest, not yet acked
        self.sent_now: set[tuple[str, str]] = set()  # (trace, span) acked during this pass
        self.lineage: dict[str, str] = {}  # session id -> the root of its forks (aliases: owner)
        self._last_progress = 0.0

    # -- one pass over the home -----------------------------------------------------------

    def run_pass(self) -> None:
        """Push everything not yet delivered; raises StopPush when the receiver is gone."""
        self.summary.passes += 1
        # Failures are what is still undelivered: a pass retries everything earlier passes
        # could not deliver, so it starts from none.
        self.summary.unreadable.clear()
        self.summary.traces_failed = self.summary.spans_failed = 0
        self.sent_now.clear()
        self.catalog.refresh(force=True)
        sessions = sorted(self.catalog.sessions(), key=lambda s: s.id)
        self.lineage = fork_roots({s.id: s for s in sessions})
        seen_paths: set[str] = set()
        for done, session in enumerate(sessions, 1):
            if session.ledger_path is None:
                self.summary.sessions_without_ledger += 1
                continue
            real = os.path.realpath(session.ledger_path)
            if real in seen_paths:  # one VM known under two ids: its ledger once
                continue
            seen_paths.add(real)
            # With labelled homes each session's spans carry its own home's label.
            label = session.home or self.home_label
            self._push_session(session.id, Path(session.ledger_path), label)
            self._report(done, len(sessions))
        self._flush()
        self._report(len(sessions), len(sessions), force=True)

    def _push_session(self, session_id: str, path: Path, home_label: str) -> None:
        try:
            signature = file_signature(path, self.salt)
        except LedgerUnavailable as error:
            self.summary.unreadable[session_id] = error.detail
            return
        known = self.state.session(session_id)
        if known and known[0] == signature:
            self.summary.sessions_unchanged += 1
            self.summary.traces_skipped += known[1]
            self.summary.spans_skipped += known[2]
            return
        try:
            conn = connect(inspect_file(path), self.settings.cache_dir)
        except LedgerUnavailable as error:
            self.summary.unreadable[session_id] = error.detail
            return
        try:
            self._push_ledger(conn, session_id, signature, home_label)
        except Exception as error:  # noqa: BLE001 - one hostile file must not stop the rest
            if isinstance(error, StopPush):
                raise
            self.summary.unreadable[session_id] = f"{type(error).__name__}: {error}"
        finally:
            conn.close()

    def _push_ledger(self, conn, session_id: str, signature: str, home_label: str) -> None:
        self.summary.sessions_read += 1
        schema = read_schema(conn)
        fingerprints = trace_fingerprints(conn, schema, self.salt)
        delivered = self.state.trace_fingerprints(session_id)
        session = _Session(session_id, signature, home_label)
        for trace_id, fingerprint in fingerprints.items():
            session.traces += 1
            previous = delivered.get(trace_id)
            if previous and previous[0] == fingerprint:
                self.summary.traces_skipped += 1
                self.summary.spans_skipped += previous[1]
                session.spans += previous[1]
                continue
            self._queue_trace(conn, schema, session, trace_id, fingerprint)
            if len(self.queue) >= self.batch_spans:
                self._flush(full_batches_only=True)
        session.listed = True
        self._settle_session(session)

    def _scope(self, session_id: str, trace_id: str) -> str | None:
        """None: the session sends `trace_id` under its plain OTLP id (it is the first to, or a
        fork of the session that did); else its own id, to scope its OTLP trace ids."""
        claimant = self.state.claimant(trace_id)
        if claimant is None:
            self.state.claim(trace_id, session_id)
            return None
        root = self.lineage.get(session_id, session_id)
        return None if self.lineage.get(claimant, claimant) == root else session_id

    def _queue_trace(self, conn, schema, session: _Session, trace_id: str, fingerprint: str):
        rows = load_trace(conn, schema, trace_id)
        scope = self._scope(session.session_id, trace_id)
        document = export_trace(rows, session.session_id, scope=scope)
        if self.masked:
            document = _masked(document)
        items = []
        total = before = 0  # spans, and those delivered by an earlier run
        for resource_spans in document["resourceSpans"]:
            resource = {
                "attributes": [
                    *resource_spans["resource"]["attributes"],
                    {"key": "capsem.home", "value": {"stringValue": session.home_label}},
                ]
            }
            resource_key = _digest(resource)
            for scope in resource_spans["scopeSpans"]:
                spans = scope["spans"]
                if not spans:
                    continue
                delivered = self.state.span_digests(spans[0]["traceId"])
                shared = _without_session(resource["attributes"])
                for span in spans:
                    total += 1
                    same = {**span, "attributes": _without_session(span["attributes"])}
                    digest = _digest([shared, scope.get("scope"), same])
                    key = (span["traceId"], span["spanId"])
                    if digest == self.queued.get(key) or (
                        key in self.sent_now and digest == delivered.get(span["spanId"])
                    ):  # another session of this pass sent it
                        self.summary.spans_shared += 1
                        continue
                    if digest == delivered.get(span["spanId"]):
                        self.summary.spans_skipped += 1
                        before += 1
                        continue
                    self.queued[key] = digest
                    items.append((resource_key, resource, span, digest))
        trace = _Trace(session, trace_id, fingerprint, total, outstanding=len(items))
        session.spans += total
        session.outstanding += 1
        for resource_key, resource, span, digest in items:
            self.queue.append(_Item(resource_key, resource, span, digest, trace))
        if not items:  # delivered before, its fingerprint not yet recorded (a crash),
            if before:  # or all of it sent earlier this run for another session
                self.summary.traces_skipped += 1
            else:
                self.summary.traces_shared += 1
            self._settle_trace(trace)

    # -- batches --------------------------------------------------------------------------

    def _flush(self, full_batches_only: bool = False) -> None:
        while self.queue and (len(self.queue) >= self.batch_spans or not full_batches_only):
            batch, self.queue = self.queue[: self.batch_spans], self.queue[self.batch_spans :]
            self._send(batch)

    def _send(self, batch: list[_Item]) -> None:
        document = _document(batch)
        try:
            attempts = self.sender.post(encode(document, self.content_type))
        except (Refused, Unreachable) as error:
            self._fail(batch + self.queue)
            self.queue, self.queued = [], {}
            raise StopPush(str(error), isinstance(error, Refused)) from error
        self.summary.requests += 1
        self.summary.retries += attempts.tries - 1
        if attempts.rejected:
            self.summary.spans_rejected += attempts.rejected
            if self.progress:
                self.progress(
                    f"the receiver rejected {attempts.rejected} of {len(batch)} spans: "
                    f"{attempts.rejected_message or 'no reason given'}"
                )
        self.state.record_spans(
            [
                (i.span["traceId"], i.span["spanId"], i.digest, i.owner.session.session_id)
                for i in batch
            ]
        )
        self.summary.spans_sent += len(batch)
        for item in batch:
            self.queued.pop((item.span["traceId"], item.span["spanId"]), None)
            self.sent_now.add((item.span["traceId"], item.span["spanId"]))
        for item in batch:
            item.owner.outstanding -= 1
            if item.owner.outstanding == 0:
                self.summary.traces_sent += 1
                self._settle_trace(item.owner)

    def _fail(self, items: list[_Item]) -> None:
        self.summary.spans_failed += len(items)
        for item in items:
            trace = item.owner
            if not trace.failed:
                trace.failed = True
                trace.session.failed = True
                self.summary.traces_failed += 1

    def _settle_trace(self, trace: _Trace) -> None:
        if trace.failed:
            return
        self.state.record_trace(
            trace.session.session_id, trace.trace_id, trace.fingerprint, trace.spans
        )
        trace.session.outstanding -= 1
        self._settle_session(trace.session)

    def _settle_session(self, session: _Session) -> None:
        if session.listed and session.outstanding == 0 and not session.failed:
            self.state.record_session(
                session.session_id, session.signature, session.traces, session.spans
            )

    def _report(self, done: int, total: int, force: bool = False) -> None:
        now = time.monotonic()
        if not self.progress or (not force and now - self._last_progress < self.progress_every):
            return
        self._last_progress = now
        s = self.summary
        self.progress(
            f"[{done}/{total} sessions] {s.spans_sent} spans sent in {s.traces_sent} traces, "
            f"{s.traces_skipped} traces already delivered, {len(s.unreadable)} unreadable"
        )


def _masked(document: dict[str, Any]) -> dict[str, Any]:
    """The document as pages show it to an actor without `view_secrets` (redaction.py): every
    attribute, span name, status message and event attribute through the same functions. Ids
    and times, which the exporter writes from hex and integers, are left as they are."""
    for resource_spans in document["resourceSpans"]:
        resource = resource_spans["resource"]
        resource["attributes"] = redaction.redact_tree(resource["attributes"])
        for scope in resource_spans["scopeSpans"]:
            for span in scope["spans"]:
                span["name"] = redaction.redact_cell(None, span["name"])
                span["attributes"] = redaction.redact_tree(span["attributes"])
                status = span.get("status") or {}
                if status.get("message"):
                    status["message"] = redaction.redact_cell(None, status["message"])
                for event in span.get("events", ()):
                    event["attributes"] = redaction.redact_tree(event["attributes"])
    return document


def _document(batch: list[_Item]) -> dict[str, Any]:
    """One OTLP document for a batch: spans grouped under their resource, in queue order."""
    groups: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {}
    for item in batch:
        groups.setdefault(item.resource_key, (item.resource, []))[1].append(item.span)
    return {
        "resourceSpans": [
            {"resource": resource, "scopeSpans": [{"scope": SCOPE, "spans": spans}]}
            for resource, spans in groups.values()
        ]
    }
