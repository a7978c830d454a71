"""Static vocabulary for realistic content: providers, models, prices, tools, commands.

Prices are USD per million tokens, close to the genai-prices table Capsem embeds (spec §7);
ollama is never priced.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Provider:
    name: str
    domain: str
    path: str  # may contain {model}
    process_name: str
    call_prefix: str
    models: dict[str, tuple[float, float]]
    native_tools: tuple[str, ...]
    port: int = 443  # 443: HTTPS through the MITM proxy; Ollama is plain HTTP on 11434
    key_header: str = "authorization"  # where the guest puts the (substituted) API key


PROVIDERS: dict[str, Provider] = {
    "anthropic": Provider(
        "anthropic",
        "api.anthropic.com",
        "/v1/messages",
        "claude",
        "toolu_01",
        {
            "claude-sonnet-4-5": (3.0, 15.0),
            "claude-opus-4-1": (15.0, 75.0),
            "claude-haiku-4-5": (1.0, 5.0),
        },
        ("Bash", "Read", "Edit", "Write", "Grep"),
        key_header="x-api-key",
    ),
    "openai": Provider(
        "openai",
        "api.openai.com",
        "/v1/responses",
        "codex",
        "call_",
        {"gpt-5": (1.25, 10.0), "gpt-5-mini": (0.25, 2.0), "gpt-4.1": (2.0, 8.0)},
        ("shell", "apply_patch", "read_file"),
    ),
    "google": Provider(
        "google",
        "generativelanguage.googleapis.com",
        "/v1beta/models/{model}:streamGenerateContent",
        "gemini",
        "fc_",
        {"gemini-2.5-pro": (1.25, 10.0), "gemini-2.5-flash": (0.30, 2.50)},
        ("run_shell_command", "read_file", "write_file", "replace"),
        key_header="x-goog-api-key",
    ),
    # The local Ollama endpoint Capsem matches (default_provider_rules.toml [ai.ollama]):
    # localhost / 127.0.0.1 / host.docker.internal / local.ollama on port 11434.
    "ollama": Provider(
        "ollama",
        "host.docker.internal",
        "/api/chat",
        "opencode",
        "call_",
        {"qwen3-coder:30b": (0.0, 0.0), "gpt-oss:20b": (0.0, 0.0)},
        ("bash", "read", "edit"),
        port=11434,
        key_header="",
    ),
}
PROVIDER_NAMES = tuple(PROVIDERS)
PRICED = frozenset({"anthropic", "openai", "google"})

# Capsem built-in MCP tools are classified 'local'; names with '__' are 'mcp_proxy'.
LOCAL_TOOLS = ("capsem_timeline", "capsem_snapshot_list")
PROXY_TOOLS = ("github__search_issues", "linear__create_issue", "sentry__get_issue")
MCP_SERVERS = {
    "github": ("search_code", "get_file_contents", "create_pull_request"),
    "filesystem": ("read_text_file", "list_directory"),
    "fetch": ("fetch",),
}

PROMPTS = (
    "Fix the failing test in tests/test_parser.py",
    "Add a --json flag to the CLI and document it",
    "Why is the build slow? Profile and speed it up",
    "Refactor the config loader into smaller functions",
    "Write a migration that adds an index on created_at",
    "Summarise the open GitHub issues labelled bug",
    "Bump the dependencies and run the test suite",
    "Explain what src/scheduler.py does",
)
FILES = (
    "src/parser.py",
    "src/cli.py",
    "src/config/loader.py",
    "tests/test_parser.py",
    "README.md",
    "migrations/0007_created_at_index.sql",
    "pyproject.toml",
    "src/scheduler.py",
)
COMMANDS = (
    ("git status --short", "/usr/bin/git", 0),
    ("pytest -q", "/usr/local/bin/pytest", 0),
    ("ls -la", "/usr/bin/ls", 0),
    ("python -m build", "/usr/local/bin/python3", 0),
    ("capsem-doctor", "/usr/local/bin/capsem-doctor", 0),
    ("make lint", "/usr/bin/make", 2),
    ("cat /etc/os-release", "/usr/bin/cat", 0),
)
# POSTs to model provider domains that are not model calls (spec §6.2 #13): OAuth refresh,
# client telemetry, file uploads. Ordinary net_events; Capsem builds no model call for them.
PROVIDER_POSTS = {
    "google": (
        ("oauth2.googleapis.com", "/token"),
        ("play.googleapis.com", "/log"),
    ),
    "anthropic": (("api.anthropic.com", "/api/event_logging/batch"),),
    "openai": (("api.openai.com", "/v1/files"),),
}
UPLOAD = ("generativelanguage.googleapis.com", "/upload/v1beta/files")
OTHER_DOMAINS = (
    ("pypi.org", "/simple/requests/", "allowed", 200),
    ("files.pythonhosted.org", "/packages/requests-2.32.3.tar.gz", "allowed", 200),
    ("github.com", "/psf/requests.git/info/refs", "allowed", 200),
    ("registry.npmjs.org", "/left-pad", "allowed", 200),
    ("evil-exfil.example.net", "/upload", "denied", 403),
)
SECURITY_EVENT_TYPES = (
    "http.request",
    "model.call",
    "mcp.tool_call",
    "mcp.tool_list",
    "mcp.event",
    "dns.query",
    "file.event",
    "file.import",
    "file.export",
    "process.exec",
    "process.exec_complete",
    "process.audit",
    "credential.substitution",
    "security.rule",
    "security.ask",
)
