"""The registry of ledger tables: what each table of session.db is, written once.

Every layer above reads its per-table facts from here (the drawing's node types and lanes,
the waterfall's bars, the OTLP spans, the tree's kinds, the labels, the follow summary, the
detail panel, the search columns, the index's counted figures, the file checks' required
columns and rollup sources, the security event types that point at a table), and the trace
page's scripts receive what they need with the data (`graph.json`'s `lane_info`, `tree.json`'s
`kinds`). Adding a table costs one `LedgerTable` here, its DDL (`generate/schemas/`) and the
generator's rows; `tests/test_architecture.py` keeps copies of these maps from growing back.

Labels are templates over the row's columns: `{column:N}` is the value cut to N characters
(`graph/labels.py` renders them), `{a|b:N}` the first of `a`, `b` that is set (Python's
`or`), and `'text'` a literal fallback, as in `{method|'CONNECT':8}`.

The order of `TABLES` is the order pages list tables in and reads go through them: the call
chain (spine), the rows joined by trace id, the security rows, bodies, then the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

PREVIEW, LENGTH, ISNULL = ":preview", ":length", ":isnull"  # column suffixes of trace_columns


@dataclass(frozen=True)
class Bar:
    """A table's rows on the waterfall timeline."""

    kind: str  # the bar's kind (colour, filter)
    duration: str | None  # column holding the duration in ms; None: an instant
    rank: int  # order among bars of the same start
    label: str  # label template


@dataclass(frozen=True)
class Span:
    """A table's rows as OTLP spans hanging off the trace's root span."""

    prefix: str  # span name: "<prefix> <name_fields…>"
    kind: str  # OpenInference span kind
    duration: str | None  # column holding the duration in ms
    name_fields: tuple[str, ...]  # columns named in the span's name, those that are set
    attributes: tuple[tuple[str, str], ...] = ()  # (attribute, column); "column:int" as integer
    client: bool = False  # SPAN_KIND_CLIENT (the row is a request the VM made)
    exit_code_error: bool = False  # a non-zero exit_code is the span's error


@dataclass(frozen=True)
class LedgerTable:
    """One ledger table of any era (spec §4.2, §4.5)."""

    name: str
    # How a trace reads it: "spine" (the call chain, graph/trace_rows.py reads it by model
    # call), "trace_id" (joined by trace id only), "event_id" (security rows joined by the
    # event id of the trace's rows), "body" (blobs), or None (not read for a trace).
    join: str | None = None
    trace_columns: tuple[str, ...] = ()  # columns a trace reads (suffix :preview, :length…)
    node_type: str | None = None  # the identity graph's node type; None: never drawn
    lane: str = "host"  # the identity graph's lane (graph/drawing.py LANES)
    subtype: str | None = None  # a security row's kind, shown on its node
    label: str = ""  # the node's label template (rows joined by trace id or event id)
    detail: str = ""  # the node's detail line template
    bar: Bar | None = None  # on the waterfall
    critical: bool = False  # may be on the critical path (the spans that do a turn's work)
    span: Span | None = None  # exported as a host span (the spine and security rows are not)
    tree_kind: str | None = None  # the span tree's kind (default: the node type)
    timeline_lane: str | None = None  # the tree's toggleable lane
    kind_label: str | None = None  # the tree kind's short label on the page
    session_layer: str | None = None  # its layer of the session timeline (Capsem's /timeline)
    child_rank: int = 3  # order among a tree span's children (own parts first, items last)
    primary: bool = False  # its rows carry an event id security rows and blobs point at
    event_types: tuple[str, ...] = ()  # security event types naming its rows (§6.2 check 11)
    search_ids: tuple[str, ...] = ()  # identifier columns searched in it (spec §6.1)
    required_columns: tuple[str, ...] = ()  # check_session.py: every era has these
    rollup: tuple[str, ...] = ()  # main.db rollup columns computed from it (spec §3.5)
    counted_as: str | None = None  # the index figure counting its rows
    summary_columns: tuple[str, ...] = ()  # what a follower sees of a row
    detail_columns: tuple[str, ...] = ()  # the detail panel's first columns
    body_owner: str | None = None  # whose body a blob of this source table is
    legacy: bool = False  # a current writer never creates it (a migrated or old file)

    @property
    def kind(self) -> str | None:
        """The span tree's kind of its rows."""
        return self.tree_kind or self.node_type


SECURITY_OUTCOME = "rule_action|effective_decision|status"
SECURITY_COLUMNS = {  # the ledger holds integer ms times (timestamp_unix_ms)
    "rule": (
        "id",
        "timestamp_unix_ms",
        "event_id",
        "event_type",
        "rule_id",
        "rule_action",
        "detection_level",
        "trace_id",
        "turn_id",
    ),
    "decision": (
        "id",
        "timestamp_unix_ms",
        "event_id",
        "event_type",
        "stage",
        "actor",
        "rule_id",
        "effective_decision",
        "reason:preview",
        "trace_id",
        "turn_id",
    ),
    "ask": (
        "id",
        "timestamp_unix_ms",
        "ask_id",
        "event_id",
        "event_type",
        "rule_id",
        "rule_name",
        "status",
        "trace_id",
        "turn_id",
    ),
}


def _security(
    subtype: str, search_ids: tuple[str, ...], summary: tuple[str, ...], detail: tuple[str, ...]
) -> LedgerTable:
    return LedgerTable(
        f"security_{subtype}_events",
        join="event_id",
        trace_columns=SECURITY_COLUMNS[subtype],
        node_type="security_event",
        lane="security_event",
        subtype=subtype,
        label=f"{subtype}: {{event_type:22}} {{{SECURITY_OUTCOME}:10}}",
        detail="{rule_id:40}",
        bar=Bar(
            "security", None, 10, f"{{event_type:24}} {{{SECURITY_OUTCOME}:10}} {{rule_id:40}}"
        ),
        tree_kind="security",
        timeline_lane="security",
        kind_label="sec",
        child_rank=1,
        search_ids=search_ids,
        summary_columns=summary,
        detail_columns=detail,
    )


TABLES: tuple[LedgerTable, ...] = (
    LedgerTable(
        "model_calls",
        session_layer="model",
        kind_label="model",
        join="spine",
        trace_columns=(
            "id",
            "event_id",
            "timestamp",
            "provider",
            "protocol",
            "model",
            "method",
            "path",
            "stream",
            "message_id",
            "status_code",
            "stop_reason",
            "input_tokens",
            "output_tokens",
            "duration_ms",
            "estimated_cost_usd",
            "usage_details",
            "trace_id",
            "turn_id",
            "messages_count",
            "tools_count",
            "request_bytes",
            "response_bytes",
            "text_content:preview",
            "request_body_preview:isnull",
        ),
        node_type="model_call",
        lane="model_call",
        bar=Bar("model", "duration_ms", 0, "{provider:12} {model:30} → {stop_reason:14}"),
        critical=True,
        primary=True,
        event_types=("model.call",),
        search_ids=("trace_id", "turn_id", "event_id", "message_id"),
        required_columns=("id", "timestamp", "provider", "model", "input_tokens", "output_tokens"),
        rollup=("total_input_tokens", "total_output_tokens", "total_estimated_cost"),
        summary_columns=("provider", "model", "stop_reason", "input_tokens", "output_tokens"),
        detail_columns=(
            "provider",
            "model",
            "stop_reason",
            "status_code",
            "duration_ms",
            "input_tokens",
            "output_tokens",
            "usage_details",
            "estimated_cost_usd",
            "timestamp",
            "method",
            "path",
            "stream",
            "messages_count",
            "tools_count",
            "text_content",
            "thinking_content",
        ),
        body_owner="model call",
    ),
    LedgerTable(
        "tool_calls",
        session_layer="tool",
        kind_label="tool",
        join="spine",
        trace_columns=(
            "id",
            "event_id",
            "timestamp",
            "model_call_id",
            "provider",
            "status",
            "call_index",
            "call_id",
            "tool_name",
            "origin",
            "transport",
            "server_name",
            "method",
            "decision",
            "duration_ms",
            "error_message:preview",
            "trace_id",
            "turn_id",
            "arguments:preview",
        ),
        node_type="tool_call",
        lane="tool_call",
        bar=Bar("tool", "duration_ms", 1, "{tool_name:30} ({origin:10})"),
        critical=True,
        primary=True,
        event_types=("mcp.tool_call",),
        search_ids=("trace_id", "turn_id", "event_id", "call_id"),
        required_columns=("id", "call_id", "tool_name"),
        rollup=("total_tool_calls",),
        summary_columns=("tool_name", "origin", "status", "decision", "server_name"),
        detail_columns=(
            "tool_name",
            "status",
            "origin",
            "decision",
            "duration_ms",
            "call_id",
            "arguments",
            "error_message",
            "timestamp",
            "server_name",
            "transport",
        ),
        body_owner="tool call",
    ),
    LedgerTable(
        "tool_responses",
        kind_label="result",
        join="spine",
        trace_columns=(
            "id",
            "model_call_id",
            "call_id",
            "is_error",
            "trace_id",
            "turn_id",
            "content_preview:preview",
        ),
        node_type="tool_response",
        lane="tool_response",
        search_ids=("trace_id", "call_id"),
        required_columns=("id", "model_call_id", "call_id"),
        summary_columns=("call_id", "is_error"),
        detail_columns=("call_id", "is_error", "content_preview", "model_call_id"),
    ),
    LedgerTable(
        "model_items",
        kind_label="item",
        join="spine",
        trace_columns=(
            "id",
            "event_id",
            "model_call_id",
            "timestamp",
            "kind",
            "item_index",
            "call_id",
            "tool_name",
            "trace_id",
            "turn_id",
            "content:preview",
        ),
        node_type="model_item",
        lane="model_item",
        timeline_lane="item",
        child_rank=4,
        primary=True,
        search_ids=("trace_id", "turn_id", "event_id", "call_id"),
        summary_columns=("kind", "provider", "tool_name", "call_id"),
        detail_columns=("kind", "item_index", "tool_name", "call_id", "content", "timestamp"),
    ),
    LedgerTable(
        "net_events",
        session_layer="net",
        kind_label="http",
        join="trace_id",
        trace_columns=(
            "id",
            "event_id",
            "timestamp",
            "domain",
            "port",
            "decision",
            "method",
            "path",
            "status_code",
            "duration_ms",
            "bytes_sent",
            "bytes_received",
            "conn_type",
            "process_name",
            "trace_id",
            "turn_id",
        ),
        node_type="net_event",
        lane="net",
        label="{method|'CONNECT':8} {domain:28}",
        detail="{status_code:4} {decision:10}",
        bar=Bar(
            "net",
            "duration_ms",
            3,
            "{method|'CONNECT':8} {domain:30}{path:40} {status_code:4}",
        ),
        span=Span(
            "HTTP",
            "CHAIN",
            "duration_ms",
            ("method", "domain"),
            (
                ("http.request.method", "method"),
                ("server.address", "domain"),
                ("server.port", "port:int"),
                ("url.path", "path"),
                ("http.response.status_code", "status_code:int"),
                ("capsem.decision", "decision"),
            ),
            client=True,
        ),
        tree_kind="http",
        timeline_lane="net",
        child_rank=0,
        primary=True,
        event_types=("http.request",),
        search_ids=("trace_id", "turn_id", "event_id"),
        required_columns=("id", "timestamp", "domain", "decision"),
        rollup=("total_requests", "allowed_requests", "denied_requests"),
        summary_columns=("method", "domain", "path", "decision", "status_code"),
        detail_columns=(
            "method",
            "domain",
            "path",
            "status_code",
            "decision",
            "duration_ms",
            "bytes_sent",
            "bytes_received",
            "timestamp",
        ),
        body_owner="HTTP",
    ),
    LedgerTable(
        "dns_events",
        kind_label="dns",
        join="trace_id",
        trace_columns=(
            "id",
            "event_id",
            "timestamp",
            "qname",
            "qtype",
            "rcode",
            "decision",
            "upstream_resolver_ms",
            "trace_id",
            "turn_id",
        ),
        node_type="dns_event",
        lane="net",
        label="dns {qname:30}",
        detail="{decision:12}",
        bar=Bar("dns", "upstream_resolver_ms", 4, "{qname:50} {decision:10}"),
        span=Span(
            "DNS",
            "CHAIN",
            "upstream_resolver_ms",
            ("qname",),
            (("dns.question.name", "qname"), ("capsem.decision", "decision")),
        ),
        tree_kind="dns",
        timeline_lane="dns",
        primary=True,
        event_types=("dns.query",),
        search_ids=("trace_id", "event_id"),
        counted_as="dns_queries",
        summary_columns=("qname", "decision", "rcode"),
        detail_columns=("qname", "qtype", "rcode", "decision", "upstream_resolver_ms", "timestamp"),
    ),
    LedgerTable(
        "fs_events",
        session_layer="fs",
        kind_label="file",
        join="trace_id",
        trace_columns=(
            "id",
            "event_id",
            "timestamp",
            "action",
            "path",
            "size",
            "trace_id",
            "turn_id",
        ),
        node_type="fs_event",
        label="{action:10} {path:28}",
        bar=Bar("fs", None, 7, "{action:10} {path:60}"),
        span=Span(
            "file",
            "CHAIN",
            None,
            ("action", "path"),
            (("file.path", "path"), ("capsem.action", "action")),
        ),
        tree_kind="file",
        timeline_lane="file",
        primary=True,
        event_types=("file.event", "file.import", "file.export"),
        search_ids=("trace_id", "event_id"),
        required_columns=("id", "timestamp", "action", "path"),
        rollup=("total_file_events",),
        counted_as="file_events",
        summary_columns=("action", "path", "size"),
    ),
    LedgerTable(
        "exec_events",
        session_layer="exec",
        kind_label="proc",
        join="trace_id",
        trace_columns=(
            "id",
            "event_id",
            "timestamp",
            "exec_id",
            "command:preview",
            "exit_code",
            "duration_ms",
            "source",
            "trace_id",
            "turn_id",
        ),
        node_type="exec_event",
        label="exec {command:30}",
        detail="exit {exit_code:6}",
        bar=Bar("exec", "duration_ms", 5, "{command:60} (exit {exit_code:5})"),
        critical=True,
        span=Span(
            "exec",
            "CHAIN",
            "duration_ms",
            ("command",),
            (("process.command_line", "command"), ("process.exit.code", "exit_code:int")),
            exit_code_error=True,
        ),
        tree_kind="process",
        timeline_lane="process",
        primary=True,
        event_types=("process.exec", "process.exec_complete"),
        search_ids=("trace_id", "event_id"),
        rollup=("exec_count",),
        counted_as="exec_events",
        summary_columns=("command", "exit_code", "duration_ms"),
        detail_columns=("command", "exit_code", "duration_ms", "source", "timestamp"),
    ),
    LedgerTable(
        "audit_events",
        kind_label="proc",
        join="trace_id",
        trace_columns=(
            "id",
            "event_id",
            "timestamp",
            "pid",
            "exe",
            "argv:preview",
            "exit_code",
            "exec_event_id",
            "trace_id",
            "turn_id",
        ),
        node_type="audit_event",
        label="audit {exe:30}",
        detail="{argv:40}",
        bar=Bar("audit", None, 6, "{exe:40} {argv:40}"),
        span=Span(
            "audit",
            "CHAIN",
            None,
            ("exe",),
            (
                ("process.executable.path", "exe"),
                ("process.command_line", "argv"),
                ("process.pid", "pid:int"),
            ),
        ),
        tree_kind="process",
        timeline_lane="process",
        primary=True,
        event_types=("process.audit",),
        search_ids=("trace_id", "event_id"),
        rollup=("audit_event_count",),
        counted_as="audit_events",
        summary_columns=("exe", "argv", "exit_code"),
    ),
    LedgerTable(
        "substitution_events",
        kind_label="cred",
        join="trace_id",
        trace_columns=(
            "id",
            "event_id",
            "timestamp",
            "event_type",
            "outcome",
            "provider",
            "trace_id",
            "turn_id",
        ),
        node_type="substitution_event",
        label="credential {outcome:12}",
        detail="{provider:20}",
        bar=Bar("credential", None, 9, "{outcome:12} {provider:20}"),
        span=Span(
            "credential",
            "GUARDRAIL",
            None,
            ("outcome", "provider"),
            (("capsem.outcome", "outcome"), ("capsem.provider", "provider")),
        ),
        tree_kind="credential",
        timeline_lane="process",
        primary=True,
        event_types=("credential.substitution",),
        search_ids=("trace_id", "event_id"),
        summary_columns=("provider", "outcome", "source"),
    ),
    _security(
        "rule",
        ("trace_id", "event_id"),
        ("event_type", "rule_id", "rule_action", "detection_level"),
        ("event_type", "rule_id", "rule_action", "detection_level"),
    ),
    _security(
        "decision",
        ("trace_id", "event_id"),
        ("event_type", "stage", "effective_decision", "reason"),
        ("event_type", "effective_decision", "stage", "reason"),
    ),
    _security(
        "ask",
        ("event_id", "ask_id"),
        ("event_type", "rule_name", "status"),
        ("event_type", "status", "rule_name", "rule_id"),
    ),
    LedgerTable(
        "event_body_blobs",
        kind_label="body",
        join="body",
        trace_columns=(
            "id",
            "event_id",
            "event_type",
            "source_table",
            "direction",
            "content_type",
            "original_bytes",
            "stored_bytes",
            "truncated",
            "body_hash",
            "body:length",
            "trace_id",
            "created_at",
        ),
        node_type="body",
        lane="body",
        timeline_lane="body",
        child_rank=2,
        search_ids=("trace_id", "event_id"),
        summary_columns=("source_table", "direction", "content_type", "stored_bytes"),
        detail_columns=(
            "direction",
            "source_table",
            "content_type",
            "original_bytes",
            "stored_bytes",
            "truncated",
            "body_hash",
        ),
    ),
    LedgerTable(
        "profile_mutation_events",
        summary_columns=("operation", "target_key", "status"),
    ),
    LedgerTable(
        "mcp_calls",  # 0.9 .. 1.1; trace_id from 1.1
        kind_label="tool",
        join="trace_id",
        trace_columns=(
            "id",
            "event_id",
            "timestamp",
            "server_name",
            "method",
            "tool_name",
            "request_id",
            "decision",
            "duration_ms",
            "error_message:preview",
            "trace_id",
        ),
        node_type="mcp_call",
        lane="tool_call",
        label="MCP {tool_name|method:28}",
        detail="{server_name:24}",
        bar=Bar("mcp", "duration_ms", 2, "MCP {server_name:20} {tool_name:30}"),
        critical=True,
        span=Span(
            "MCP",
            "TOOL",
            "duration_ms",
            ("server_name", "tool_name"),
            (
                ("gen_ai.tool.name", "tool_name"),
                ("tool.name", "tool_name"),
                ("capsem.server_name", "server_name"),
            ),
        ),
        tree_kind="tool_call",
        primary=True,
        search_ids=("trace_id", "event_id"),
        summary_columns=("server_name", "method", "tool_name", "decision"),
        legacy=True,
    ),
    LedgerTable(
        "snapshot_events",  # 0.16 .. 06-11 (dropped then); trace_id from 1.1
        kind_label="file",
        join="trace_id",
        trace_columns=("id", "timestamp", "slot", "origin", "name", "files_count", "trace_id"),
        node_type="snapshot_event",
        label="snapshot {name|slot:24}",
        detail="{origin:20}",
        bar=Bar("snapshot", None, 8, "snapshot {name|slot:30} ({origin:20})"),
        span=Span("snapshot", "CHAIN", None, ("origin", "name")),
        tree_kind="file",
        timeline_lane="file",
        legacy=True,
    ),
)

TABLE: dict[str, LedgerTable] = {table.name: table for table in TABLES}
NAMES: tuple[str, ...] = tuple(TABLE)


def joined_by(join: str) -> tuple[LedgerTable, ...]:
    """The tables a trace reads the `join` way ("spine", "trace_id", "event_id", "body")."""
    return tuple(table for table in TABLES if table.join == join)


def of_node_type(node_type: str) -> tuple[LedgerTable, ...]:
    return tuple(table for table in TABLES if table.node_type == node_type)


# --- what a viewer sees of each column ---------------------------------------------------------
#
# Every column of every table of a ledger (any era), of main.db and of the cross-session index
# is one of four kinds, decided here once (redaction.py applies it, core_pages/secrets_guard.py
# refuses the filters, sorts, facets and SQL a kind does not allow):
#
# * SHOWN: structural facts Capsem itself writes (ids, times, counts, sizes, status, decision,
#   hashes): shown as stored (still through the masker, as every text is);
# * CARRIER: a credential carrier (headers, query strings, cookies, env): hidden whole;
# * NAMED: a name an agent, a model or a provider chose (a domain, a process or program name,
#   a model, a tool name, a call id, an HTTP or JSON-RPC method): what readers navigate by, so
#   shown (through the masker) and faceted, and filtered by whole value (`=`, `!=`, `in`,
#   blank or not) when that value is not itself masked; but not sorted, compared, matched by
#   pattern or read by the reader's own SQL, since any value may carry a credential that reads
#   masked (`sk-ant-….evil.example`) and each of those would be an oracle on it or, as
#   `hex(domain)`, a way around the masker;
# * FREE_TEXT: text a person or a program wrote (bodies, prompts, commands, arguments, paths,
#   DNS names, reasons, labels): masked, or hidden whole under `hide_free_text`.
#
# A column this table does not list (a table or column of an unknown era, a future Capsem
# column) is UNCLASSIFIED: hidden from viewers until someone classifies it here
# (tests/test_allowlist.py fails on a column of tests/capsem_ddl that is not).

SHOWN, NAMED, CARRIER, FREE_TEXT, UNCLASSIFIED = (
    "shown",
    "named",
    "carrier",
    "free_text",
    "unclassified",
)


def _columns(shown: str, free_text: str = "", carrier: str = "", named: str = "") -> dict[str, str]:
    kinds = {name: SHOWN for name in shown.split()}
    kinds.update({name: NAMED for name in named.split()})
    kinds.update({name: FREE_TEXT for name in free_text.split()})
    kinds.update({name: CARRIER for name in carrier.split()})
    return kinds


# Tables of a session ledger, every era (main.db of some eras holds copies of them too).
LEDGER_COLUMNS: dict[str, dict[str, str]] = {
    "model_calls": _columns(
        "id event_id timestamp provider protocol stream status_code input_tokens output_tokens "
        "duration_ms estimated_cost_usd trace_id turn_id messages_count tools_count "
        "request_bytes response_bytes pid credential_ref",
        "path request_body_preview response_body_preview system_prompt_preview text_content "
        "thinking_content",
        named="model method message_id stop_reason usage_details process_name",
    ),
    "tool_calls": _columns(
        "id event_id timestamp model_call_id provider status call_index origin transport "
        "decision duration_ms trace_id turn_id mcp_call_id bytes_sent bytes_received "
        "policy_action policy_mode policy_rule credential_ref",
        "arguments error_message policy_reason response_preview server_name",
        named="call_id tool_name method request_id process_name",
    ),
    "tool_responses": _columns(
        "id model_call_id is_error trace_id turn_id credential_ref",
        "content_preview",
        named="call_id",
    ),
    "model_items": _columns(
        "id event_id model_call_id timestamp kind item_index trace_id turn_id provider "
        "content_hash credential_ref",
        "content arguments path",
        named="call_id tool_name model",
    ),
    "net_events": _columns(
        "id event_id timestamp port decision status_code duration_ms bytes_sent bytes_received "
        "conn_type pid trace_id turn_id matched_rule policy_action policy_mode policy_rule "
        "credential_ref",
        "path policy_reason request_body_preview response_body_preview",
        "query request_headers response_headers",
        named="domain method process_name",
    ),
    "dns_events": _columns(
        "id event_id timestamp qtype qclass rcode decision upstream_resolver_ms source_proto "
        "matched_rule policy_action policy_mode policy_rule trace_id turn_id credential_ref",
        "qname policy_reason",
        named="answer_ip process_name",
    ),
    "fs_events": _columns(
        "id event_id timestamp action size trace_id turn_id credential_ref", "path directory name"
    ),
    "exec_events": _columns(
        "id event_id timestamp exec_id exit_code duration_ms source pid stdout_bytes "
        "stderr_bytes mcp_call_id trace_id turn_id credential_ref",
        "command stdout_preview stderr_preview",
        named="process_name",
    ),
    # exe and parent_exe name the program that ran (as comm does): Capsem's Stats count
    # "unique binaries" by them. What it was asked to do (argv) and where (cwd) is free text.
    "audit_events": _columns(
        "id event_id timestamp audit_id pid ppid uid tty exit_code exec_event_id session_id "
        "trace_id turn_id credential_ref",
        "argv cwd",
        named="comm exe parent_exe",
    ),
    "substitution_events": _columns(
        "id event_id timestamp event_type outcome provider source algorithm confidence "
        "material_class substitution_ref trace_id turn_id",
        "context_json",
        "substitution_value substitution_values",
    ),
    "security_rule_events": _columns(
        "id timestamp_unix_ms event_id event_type rule_id rule_action detection_level trace_id "
        "turn_id credential_ref",
        "event_json rule_json",
    ),
    "security_decision_events": _columns(
        "id timestamp_unix_ms event_id event_type stage actor rule_id effective_decision "
        "requested_decision previous_decision plugin_id trace_id turn_id credential_ref",
        "reason event_json",
    ),
    "security_ask_events": _columns(
        "id timestamp_unix_ms ask_id event_id event_type rule_id rule_name status resolver "
        "trace_id turn_id",
        "reason event_json rule_json",
    ),
    "security_events": _columns(
        "id event_id event_type event_family timestamp timestamp_unix_ms sequence_no "
        "session_id trace_id turn_id span_id stream_id mcp_call_id exec_id activity_id "
        "parent_event_id parent_process_id process_id process_operation process_command_class "
        "profile_id profile_revision user_id vm_id accounting_owner attribution_scope "
        "origin_kind source_engine enforceability final_action finding_count label_count "
        "mutation_count redaction_state",
        named="message_id tool_call_id",
    ),
    "security_event_links": _columns("id event_id link_type linked_event_id", "evidence"),
    "security_event_steps": _columns(
        "id event_id step_index kind pack_id rule_id status", "message"
    ),
    "detection_findings": _columns(
        "id finding_id event_id pack_id rule_id sigma_id severity confidence title"
    ),
    "detection_finding_tags": _columns("id finding_id tag tag_index"),
    "event_body_blobs": _columns(
        "id event_id event_type source_table direction content_type original_bytes "
        "stored_bytes truncated body_hash trace_id turn_id created_at",
        "body",
    ),
    "profile_mutation_events": _columns(
        "id timestamp_unix_ms mutation_id profile_id actor category operation target_kind "
        "target_key rule_id status old_hash new_hash old_size new_size trace_id",
        "affected_path filename error",
    ),
    "policy_hook_events": _columns(
        "id timestamp session_id trace_id decision_id endpoint_id rule_id decision status "
        "fallback latency_ms spec_hash spec_version audit_tags",
        "callback reason error",
    ),
    "session_identity": _columns("id profile_id user_id vm_id updated_at"),
    "mcp_calls": _columns(
        "id event_id timestamp decision duration_ms trace_id bytes_sent bytes_received "
        "policy_action policy_mode policy_rule",
        "server_name error_message request_preview response_preview policy_reason",
        named="method tool_name request_id process_name",
    ),
    "snapshot_events": _columns(
        "id timestamp slot origin files_count start_fs_event_id stop_fs_event_id trace_id", "name"
    ),
    "ai_model_interactions": _columns(
        "id interaction_id model_call_id session_id trace_id request_id user_id vm_id "
        "profile_id provider api_family accounting_owner attribution_scope evidence_status "
        "origin_kind parse_status source_engine request_message_count request_stream "
        "request_tools_declared_count request_unknown_fields_present request_raw_shape_version "
        "response_raw_shape_version usage_estimated_cost_micros usage_input_tokens "
        "usage_output_tokens",
        "request_system_prompt_preview response_text_preview response_thinking_preview",
        named="model request_model response_id response_provider_response_id response_stop_reason",
    ),
    "ai_model_tool_calls": _columns(
        "id interaction_id tool_call_id call_index origin status arguments_status "
        "parse_confidence linked_mcp_call_id",
        "arguments_json arguments_raw",
        named="provider_call_id normalized_name raw_name",
    ),
    "ai_model_tool_results": _columns(
        "id interaction_id tool_call_id content_kind is_error result_status returned_to_model "
        "parse_confidence linked_mcp_call_id",
        "content_json content_preview",
    ),
    "ai_mcp_execution_evidence": _columns(
        "id interaction_id mcp_call_id server_id transport is_error latency_ms link_status "
        "linked_model_interaction_id linked_model_tool_call_id result_kind",
        "request_arguments_json request_arguments_raw result_json result_preview",
        named="tool_name namespaced_tool_name",
    ),
    "ai_content_blocks": _columns(
        "id interaction_id tool_call_id block_index kind path_class is_error redacted",
        "name file_name marker reason text_preview json_preview",
        named="raw_type mime_type",
    ),
    "ai_usage_details": _columns(
        "id interaction_id scope value",
        named="name",
    ),
    "sqlite_sequence": _columns("name seq"),
}
# main.db: the session list and its rollups (and, in some eras, copies of the ledger tables).
MAIN_COLUMNS: dict[str, dict[str, str]] = {
    **LEDGER_COLUMNS,
    "sessions": _columns(
        "id mode status created_at stopped_at scratch_disk_size_gb ram_bytes total_requests "
        "allowed_requests denied_requests total_input_tokens total_output_tokens "
        "total_estimated_cost total_tool_calls total_mcp_calls total_file_events "
        "compressed_size_bytes vacuumed_at storage_mode rootfs_hash rootfs_version forked_from "
        "persistent exec_count audit_event_count",
        "command",
    ),
    "ai_usage": _columns(
        "session_id provider call_count input_tokens output_tokens estimated_cost total_duration_ms"
    ),
    "tool_usage": _columns(
        "session_id call_count total_bytes total_duration_ms",
        named="tool_name",
    ),
    "mcp_usage": _columns(
        "session_id call_count total_bytes total_duration_ms",
        "server_name",
        named="tool_name",
    ),
}
_TOTALS = (
    "session_id requests allowed_requests denied_requests error_requests model_calls "
    "input_tokens output_tokens cache_read_tokens thinking_tokens cost_usd tool_calls mcp_calls "
    "file_events exec_events audit_events dns_queries first_event_at last_event_at"
)
# The cross-session index (index/sql/create.sql), its full-text tables included.
INDEX_COLUMNS: dict[str, dict[str, str]] = {
    "ledgers": _columns(
        "session_id home session_name kind era size mtime_ns wal_size wal_mtime_ns indexed_at "
        "index_ms inherited_from inherited_rows parent_key",
        "ledger_path problem inherited_problem",
    ),
    "ledger_aliases": _columns("session_id owner_id"),
    "session_totals": _columns(_TOTALS),
    "file_totals": _columns(_TOTALS),
    "model_usage": _columns(
        "session_id provider day calls input_tokens output_tokens cache_read_tokens "
        "thinking_tokens cost_usd duration_ms",
        named="model",
    ),
    "tool_calls": _columns(
        "session_id source_table row_id origin day duration_ms decision status failed",
        "server_name",
        named="tool_name",
    ),
    "failing_domains": _columns(
        "session_id source requests denied errors status_4xx status_5xx last_seen",
        named="domain",
    ),
    "id_lookup": _columns("value id_kind session_id table_name row_id"),
    "copied_ids": _columns("value id_kind session_id table_name row_id"),
    "index_meta": _columns("key value"),
    "text_rows": _columns(
        "id session_id kind table_name row_id event_id trace_id model_call_id provider at",
        "body",
        named="model",
    ),
    "text_search": _columns("", "body"),
    "text_search_data": _columns("id", "block"),
    "text_search_idx": _columns("segid pgno", "term"),
    "text_search_docsize": _columns("id sz"),
    "text_search_config": _columns("k v"),
    "session_checks": _columns(
        "session_id home session_name kind created_at profile verdict errors warnings infos "
        "era checked_at check_ms ledger_size ledger_mtime_ns ledger_wal_size "
        "ledger_wal_mtime_ns row_sig",
        "problem",
    ),
    "session_findings": _columns(
        "session_id kind severity title check_id table_name row_count row_ids", "failed"
    ),
    "policy_events": _columns(
        "session_id category source_table day detail events first_at last_at", "subject"
    ),
}
COLUMNS_OF_DATABASE: dict[str, dict[str, dict[str, str]]] = {
    "ledger": LEDGER_COLUMNS,
    "main": MAIN_COLUMNS,
    "index": INDEX_COLUMNS,
}
# Names met outside the tables above: Capsem's canned queries' results built from free text
# (a trace chain's `summary`, a model call's `detail`), fields of plugin JSON and of other
# stores (main.db's registry, OTLP) that carry credentials or free text.
OTHER_FIELDS: dict[str, str] = {
    **dict.fromkeys(("summary", "detail", "label"), FREE_TEXT),
    **dict.fromkeys(
        (
            "body",
            "content",
            "command",
            "argv",
            "response_preview",
            "request_preview",
            "evidence_json",
            "payload_json",
            "detail_json",
            "error_message",
            "last_error",
        ),
        FREE_TEXT,
    ),
    **dict.fromkeys(
        (
            "headers",
            "query_string",
            "cookie",
            "cookies",
            "set_cookie",
            "env",
            "environment",
            "credential_value",
            "secret_value",
        ),
        CARRIER,
    ),
}
# SQLite's own names for a row's id: shown wherever they are read.
ROWID_NAMES = frozenset({"rowid", "oid", "_rowid_"})
# SQLite's own tables (the schema, statistics) and PRAGMA table-valued functions: the schema
# is shown (Datasette reads it to draw every page).
SQLITE_OWN = ("sqlite_", "pragma_")


def column_kind(database: str, table: str | None, column: str | None) -> str:
    """SHOWN, NAMED, CARRIER, FREE_TEXT or UNCLASSIFIED: what a viewer sees of `table.column` in a
    database of kind `database` ("ledger", "main" or "index")."""
    if column is None or table is None:
        return SHOWN  # no column read (SQLite's own reads, an expression's result)
    name = column.lower()
    if name in ROWID_NAMES or table.lower().startswith(SQLITE_OWN):
        return SHOWN
    kinds = COLUMNS_OF_DATABASE.get(database, LEDGER_COLUMNS).get(table)
    return UNCLASSIFIED if kinds is None else kinds.get(name, UNCLASSIFIED)


def names_of_kind(kind: str) -> frozenset[str]:
    """Every column name that is of `kind` in some table of some database (or another
    field of that kind, `OTHER_FIELDS`): what the row factory, which sees result names only,
    treats as that kind wherever it meets the name."""
    return frozenset(
        [
            column
            for tables in COLUMNS_OF_DATABASE.values()
            for kinds in tables.values()
            for column, found in kinds.items()
            if found == kind
        ]
        + [column for column, found in OTHER_FIELDS.items() if found == kind]
    )
