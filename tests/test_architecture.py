"""The floor plan holds: one-way layers, no hidden import cycles, one home per idea.

Read from the package's own source with `ast`, so a regression fails here, not in review.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

from datasette_capsem.graph.drawing import LANES
from datasette_capsem.graph.tree import TIMELINE_LANES
from datasette_capsem.ledger.tables import TABLES

PACKAGE = Path(__file__).resolve().parents[1] / "datasette_capsem"
NAME = "datasette_capsem"

# Layers, lowest first: a module may import only from its own layer or lower ones
# (docs/architecture.md). `generate` is a tool beside the product and may read the ledger layer.
LAYERS: tuple[tuple[str, ...], ...] = (
    (
        "findings",
        "sqlfiles",
        "config",
        "errors",
        "urls",
        "hookspecs",
        "memory",
        "permissions",
        "streams",
        "versioned_store",
    ),
    # files, the ledger model (its registry classifies the columns redaction hides), plugins
    ("readonly", "ledger", "plugins", "redaction"),
    ("catalog",),  # discovery
    ("mount", "queries"),  # Datasette databases; canned queries
    ("checks",),  # the rule book
    ("index", "graph"),  # cross-session index; the trace model and its renderers
    ("session",),  # what the session pages read (overview, stats, timeline, follow, search…)
    ("push",),  # the OTLP stream into a team's trace store
    ("state",),  # the composition root
    ("views", "core_pages", "cli", "generate"),
    ("__init__",),  # Datasette hooks
)


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        found[".".join((NAME, *parts)).removesuffix(".__init__")] = path
    return found


def imports(path: Path) -> tuple[set[str], list[tuple[int, str]]]:
    """(modules imported at module level, (line, module) imported inside functions)."""
    tree = ast.parse(path.read_text("utf-8"))
    known = MODULES
    top, nested = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(NAME):
            # `from package import submodule` imports the submodule, not the package's names
            names = {
                f"{node.module}.{alias.name}"
                if f"{node.module}.{alias.name}" in known
                else node.module
                for alias in node.names
            }
        elif isinstance(node, ast.Import):
            names = {a.name for a in node.names if a.name.startswith(NAME)}
        else:
            continue
        if node.col_offset == 0:
            top |= names
        else:
            nested += [(node.lineno, name) for name in sorted(names)]
    return top, nested


MODULES = modules()


def layer_of(module: str) -> int:
    top = module.split(".")[1] if "." in module else "__init__"
    for index, layer in enumerate(LAYERS):
        if top in layer:
            return index
    raise AssertionError(f"{module} is in no layer: add it to LAYERS and docs/architecture.md")


def graph() -> dict[str, set[str]]:
    known = modules()
    edges = {}
    for module, path in known.items():
        top, _ = imports(path)
        edges[module] = {name for name in top if name in known and name != module}
    return edges


def test_no_import_runs_from_a_lower_layer_to_a_higher_one():
    for module, targets in graph().items():
        for target in targets:
            assert layer_of(target) <= layer_of(module), f"{module} imports {target}"


def test_the_import_graph_has_no_cycles():
    edges = graph()
    state: dict[str, int] = {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in edges[module]:
            if state.get(target) == 1:
                raise AssertionError(" -> ".join([*path, module, target]))
            if target not in state:
                visit(target, [*path, module])
        state[module] = 2

    for module in edges:
        if module not in state:
            visit(module, [])


def test_no_import_inside_a_function_dodges_a_cycle():
    for module, path in modules().items():
        _, nested = imports(path)
        assert not nested, f"{module}: {nested}"


def test_views_raise_errors_and_state_is_typed():
    for path in (PACKAGE / "views").glob("*.py"):
        source = path.read_text("utf-8")
        assert "isinstance(opened, Response)" not in source, path.name
        assert ", Response)" not in source.replace("(Response, ", ""), path.name
    for path in PACKAGE.rglob("*.py"):
        assert ".services" not in path.read_text("utf-8"), path


def test_one_url_builder_and_one_identifier_quoting():
    for path in PACKAGE.rglob("*.py"):
        if path.name == "urls.py":
            continue
        source = path.read_text("utf-8")
        assert 'f"/-/capsem/sessions/' not in source and "f'/-/capsem/sessions/" not in source, path
        assert "def quote_identifier" not in source and "def quote(" not in source, path


def _modules_of_a_server(*imports: str) -> set[str]:
    """The modules a fresh interpreter holds after making a Datasette (and importing `imports`)."""
    probe = (
        "import sys, datasette.app\n"
        + "".join(f"import {name}\n" for name in imports)
        + "from datasette.app import Datasette\n"
        "Datasette(memory=True)\n"
        "print('\\n'.join(sorted(sys.modules)))"
    )
    found = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        cwd=PACKAGE.parent,
        timeout=120,
    ).stdout.split()
    return set(found)


def test_a_server_imports_no_command_only_module():
    """Datasette imports the plugin for its hooks; the CLI's sub-commands (the generator, the
    OTLP encoder with protobuf and OpenTelemetry) load only when a command names them. What
    Datasette imports itself is not the plugin's doing (1.0 imports opentelemetry's context)."""
    found = _modules_of_a_server("datasette_capsem")
    assert "datasette_capsem.state" in found  # the plugin itself was imported
    added = found - _modules_of_a_server()
    command_only = (
        "datasette_capsem.generate",
        "datasette_capsem.push",
        "datasette_capsem.cli.",
        "opentelemetry",
        "google.protobuf",
    )
    assert not [name for name in added if name.startswith(command_only)]


def _table_vocabulary() -> tuple[set[str], set[str]]:
    """(ledger table names, node types and tree kinds) of the registry (ledger/tables.py)."""
    names = {table.name for table in TABLES}
    kinds = {k for table in TABLES for k in (table.node_type, table.kind) if k}
    return names, kinds - {"body"}  # "body" is also an ordinary key (a request's body)


def _string_constants(nodes: list[ast.expr | None]) -> set[str]:
    return {n.value for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, str)}


# Modules whose dicts name tables for another reason (the registry itself).
NOT_TABLE_MAPS = {
    "ledger/tables.py": "the registry",
    "ledger/rollup.py": "ROLLUP_FIGURES maps main.db columns to index figures, named like tables",
}


def test_one_registry_of_ledger_tables():
    """What a ledger table is lives in ledger/tables.py only: no other module of the product
    keeps a dict keyed by (or mapping to) three or more ledger tables or node types, the ~20
    per-table maps it replaced (the generator, a tool beside the product, writes the tables)."""
    names, kinds = _table_vocabulary()
    found = []
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative in NOT_TABLE_MAPS or relative.startswith("generate/"):
            continue
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if not isinstance(node, ast.Dict):
                continue
            for strings in (_string_constants(node.keys), _string_constants(node.values)):
                if len(strings & names) >= 3 or len(strings & kinds) >= 3:
                    found.append(f"{relative}:{node.lineno}")
    assert not found, f"per-table maps outside the registry: {sorted(set(found))}"


def test_scripts_receive_the_table_vocabulary_with_the_data():
    """The page's scripts keep no copy of the lanes, node types or kinds: an object literal
    keyed by three of them is a map that belongs to the registry (graph.json `lane_info`,
    tree.json `kinds` and `timeline_lanes` carry them)."""
    _, kinds = _table_vocabulary()
    vocabulary = kinds | set(LANES) | {lane for lane, _ in TIMELINE_LANES} | {"trace", "turn"}
    found = []
    for path in (PACKAGE / "static").glob("*.js"):
        source = path.read_text("utf-8")
        for literal in re.findall(r"\{[^{}]*\}", source):
            keys = set(re.findall(r"(?:^|[{,\s])([A-Za-z_]+)\s*:", literal))
            if len(keys & vocabulary) >= 3:
                found.append(f"{path.name}: {literal[:60]}")
    assert not found, found


def test_no_package_holds_more_than_twenty_modules():
    """Packages by job, small enough to find things in (issue: a house to carry on)."""
    for package in sorted(p for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()):
        modules = [m for m in package.glob("*.py") if m.name != "__init__.py"]
        assert len(modules) <= 20, (package.name, len(modules))
