"""The docs say what the code does: hooks, the example plugin, CLI commands, settings, and the
format notes every `spec §x.y` comment points at (as datasette/tests/test_docs.py does)."""

from __future__ import annotations

import importlib
import re
import sqlite3
import sys
from pathlib import Path

import pytest

from datasette_capsem import hookspecs
from datasette_capsem.catalog import Catalog
from datasette_capsem.checks import check_session
from datasette_capsem.cli import SUBCOMMAND_MODULES, subcommands
from datasette_capsem.config import load_settings
from datasette_capsem.ledger.schema import read_schema
from datasette_capsem.plugins import plugin_manager
from datasette_capsem.queries import canned_queries_for
from datasette_capsem.readonly import open_readonly
from tests.helpers import DOCUMENTS, doc_section, documentation, session_in

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "datasette_capsem"
README = (ROOT / "README.md").read_text("utf-8")
DOCS = documentation()
EXTENDING = (ROOT / "docs" / "extending.md").read_text("utf-8")
FORMAT = (ROOT / "docs" / "capsem-format.md").read_text("utf-8")


def code_blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, re.S)


def test_every_hook_is_documented():
    hooks = [name for name in dir(hookspecs) if name.startswith("capsem_")]
    assert hooks
    for name in hooks:
        assert f"def {name}()" in EXTENDING, name


def test_the_example_plugin_registers_and_reports(tmp_path, capsem_home, manifest):
    """Run docs/extending.md's example as written: its module and SQL files, registered."""
    package = tmp_path / "doc_plugin" / "my_package"
    (package / "sql").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    module = next(b for b in code_blocks(EXTENDING, "python") if "def capsem_checks" in b)
    (package / "capsem_plugin.py").write_text(module)
    for block in code_blocks(EXTENDING, "sql"):
        name = "exfil_domain" if "json_each(:domains)" in block else "biggest_bodies"
        (package / "sql" / f"{name}.sql").write_text(block)
    session = session_in(manifest, era="head", has=("clean",))
    ledger = tmp_path / "session.db"  # a private copy with one request the check must catch
    source = open_readonly(capsem_home / session["ledger"], tmp_path / "cache")
    target = sqlite3.connect(ledger)
    source.backup(target)
    source.close()
    with target:
        target.execute(
            "INSERT INTO net_events (timestamp, domain, decision) "
            "VALUES ('2026-08-20T10:00:00.000000Z', 'evil-exfil.example.net', 'allowed')"
        )
    planted = target.execute("SELECT max(id) FROM net_events").fetchone()[0]
    target.close()
    sys.path.insert(0, str(package.parent))
    plugin = importlib.import_module("my_package.capsem_plugin")
    plugin_manager().register(plugin)
    try:
        conn = open_readonly(ledger, tmp_path / "cache")
        try:
            report = check_session(conn)
            offered = canned_queries_for(read_schema(conn), "session")
        finally:
            conn.close()
    finally:
        plugin_manager().unregister(plugin)
        sys.path.remove(str(package.parent))
        for name in ("my_package.capsem_plugin", "my_package"):
            sys.modules.pop(name, None)
    found = next(f for f in report.findings if f.kind == "exfil_domain")
    assert found.row_ids == [planted] and found.severity == "error"
    assert report.verdict == "error"
    assert "biggest_bodies" in offered


def test_the_readme_stays_a_newcomers_page():
    """Details live in docs/: the README says what it is, how to start and where to read on."""
    assert len(README.encode()) <= 12 * 1024, len(README.encode())
    for document in re.findall(r"\]\(((?:docs|benchmarks)/[\w.-]+\.md)\)", README):
        assert (ROOT / document).is_file(), document


def test_every_cli_command_has_help_and_is_in_the_readme():
    assert len(subcommands()) == len(SUBCOMMAND_MODULES)
    for name, command in zip(SUBCOMMAND_MODULES, subcommands(), strict=True):
        assert command.name == name
        assert command.help and len(command.help) > 20, command.name
        assert f"`{command.name}`" in README, command.name
        assert f"`{command.name}" in (ROOT / "docs" / "cli.md").read_text() + DOCS, command.name


def test_every_setting_is_in_the_configuration_table():
    keys = set()
    for path in PACKAGE.rglob("*.py"):
        source = path.read_text("utf-8")
        keys |= set(re.findall(r"config\.get\(\"(\w+)\"", source))
        keys |= set(re.findall(r"plugin_config\(PLUGIN_NAME\) or \{\}\)\.get\(\"(\w+)\"", source))
    assert {"capsem_home", "view_secrets", "hide_free_text"} <= keys
    for key in keys:
        assert f"| `{key}` |" in doc_section("Configuration"), key


def test_every_format_reference_resolves():
    headings = set(re.findall(r"^#{2,3} (\d+(?:\.\d+)?)[. ]", FORMAT, re.M))
    cited = set()
    for path in [*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.sql"), *PACKAGE.rglob("*.html")]:
        cited |= set(re.findall(r"spec §(\d+(?:\.\d+)?)", path.read_text("utf-8")))
    assert cited and not cited - headings, sorted(cited - headings)


@pytest.mark.parametrize("document", DOCUMENTS)
def test_docs_name_files_that_exist(document):
    text = (ROOT / document).read_text("utf-8")
    for path in re.findall(r"`(datasette_capsem/[\w/.]+\.\w+)`", text):
        assert (ROOT / path).exists(), (document, path)


def test_the_catalog_reads_the_documented_layout(capsem_home, tmp_path):
    settings = load_settings({"capsem_home": str(capsem_home), "cache_dir": str(tmp_path)})
    kinds = {s.kind for s in Catalog(settings).sessions()}
    assert {"ephemeral", "persistent", "failed", "legacy"} <= kinds
