"""Documented commands are tested commands: every way the README (and metadata.yml's header)
says to serve the plugin is run here as written, as a real server, and crawled.

Only what cannot be used on a test machine is substituted: the port (a free one instead of
8001), the `datasette` executable (this virtualenv's), and the systemd unit's paths (its
WorkingDirectory is this repository, its CAPSEM_HOME a generated home).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.helpers import documentation
from tests.security_support import (
    ROOT,
    core_routes,
    free_port,
    plugin_routes,
    session_ids,
    stop,
    viewer_ok,
    wait_for,
)

README = ROOT / "README.md"
DATASETTE = Path(sys.executable).with_name("datasette")
SERVE = re.compile(r"(?:^|/)datasette\s+(?:capsem\s+)?serve\b")


def documented_commands() -> list[dict]:
    """Every serving command of the README (code blocks, systemd unit, inline code) and of
    metadata.yml's header comment: {"text", "argv", "env", "cwd"}."""
    text = documentation()
    found: list[dict] = []
    for lang, block in re.findall(r"```(\w*)\n(.*?)```", text, re.S):
        if lang == "ini":
            env = dict(re.findall(r"^Environment=(\w+)=(\S+)$", block, re.M))
            workdir = re.search(r"^WorkingDirectory=(\S+)$", block, re.M)
            for line in re.findall(r"^ExecStart=(.+)$", block, re.M):
                found.append({"text": line, "env": env, "cwd": workdir.group(1)})
            continue
        for line in block.replace("\\\n", " ").splitlines():
            for part in line.split("&&"):
                if SERVE.search(part.strip()):
                    found.append({"text": part.strip(), "env": {}, "cwd": None})
    for inline in re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.S)):
        if SERVE.match(inline.strip()):
            found.append({"text": inline.strip(), "env": {}, "cwd": None})
    header = (ROOT / "metadata.yml").read_text().split("\n\n", 1)[0]
    comment = " ".join(line.lstrip("# ").rstrip("\\ ") for line in header.splitlines())
    for match in re.findall(r"Serve with:\s+(datasette serve[^()]*?)\s*\(", comment):
        found.append({"text": " ".join(match.split()), "env": {}, "cwd": None})
    # Serving labelled homes (--home LABEL=PATH, --homes-dir) runs in tests/test_homes.py,
    # over the homes it names; this file serves `capsem_home`.
    unique = {c["text"]: c for c in found if "--homes-dir" not in c["text"]}
    return list(unique.values())


COMMANDS = documented_commands()


def test_the_readme_documents_the_commands_this_file_runs():
    texts = [c["text"] for c in COMMANDS]
    assert any("capsem serve" in t for t in texts)
    assert any(t.startswith("datasette serve .") for t in texts)
    assert any("ExecStart" not in t and t.startswith("/opt/") for t in texts)  # systemd
    assert any("--metadata metadata.yml" in t for t in texts)
    assert "datasette serve" in texts


@pytest.fixture(scope="module")
def served_cache(tmp_path_factory) -> Path:
    """The plugin cache every documented server of this module keeps (derived files only): the
    first one builds the index and the rule book's reports, the next ones find them stored and
    valid, as a restarted server does, instead of each recomputing them while it is crawled."""
    return tmp_path_factory.mktemp("readme-serving-cache")


def runnable(
    command: dict, port: int, home: Path, tmp: Path, cache: Path
) -> tuple[list[str], dict, Path]:
    argv = shlex.split(command["text"])
    assert argv[0].endswith("datasette"), argv
    argv[0] = str(DATASETTE)
    if "--port" in argv:
        argv[argv.index("--port") + 1] = str(port)
    else:
        argv += ["--port", str(port)]
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("CAPSEM_", "DATASETTE_CAPSEM"))
    }
    env.update(
        HOME=str(tmp / "user"),
        XDG_CACHE_HOME=str(tmp / "xdg-cache"),
        CAPSEM_HOME=str(home),
        DATASETTE_CAPSEM_CACHE=str(cache),
        PYTHONPATH=str(ROOT),  # the plugin of this checkout, wherever it is installed from
    )
    for key in command["env"]:  # the unit's own paths, moved to this machine
        own = {"CAPSEM_HOME": str(home), "DATASETTE_CAPSEM_CACHE": str(cache)}
        env[key] = own.get(key, str(tmp / key.lower()))
    # "$CAPSEM_HOME" in a documented command is expanded as a shell would
    argv = [re.sub(r"\$\{?(\w+)\}?", lambda m: env.get(m.group(1), m.group(0)), a) for a in argv]
    return argv, env, ROOT  # WorkingDirectory: the repository (a configuration directory)


def is_team(argv: list[str]) -> bool:
    """Served with the repository's metadata.yml (directory or file): a team instance."""
    return "." in argv[1:] or "metadata.yml" in argv


@pytest.mark.heavy  # tens of seconds: its module is scheduled first (conftest.py)
@pytest.mark.parametrize("command", COMMANDS, ids=[c["text"] for c in COMMANDS])
def test_documented_serving_command(command, capsem_home, manifest, tmp_path, served_cache):
    port = free_port()
    argv, env, cwd = runnable(command, port, capsem_home, tmp_path, served_cache)
    ids = session_ids(capsem_home, manifest, tmp_path / "probe-cache")
    process = subprocess.Popen(
        argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    base = f"http://127.0.0.1:{port}"
    team = is_team(argv)
    problems: list[tuple] = []
    try:
        wait_for(base + "/-/versions.json", process)
        with httpx.Client(base_url=base, timeout=60) as client:
            for path in plugin_routes(ids) + core_routes(ids):
                anonymous = client.get(path)
                viewer = client.get(path, headers={"X-Forwarded-User": "alice"})
                for who, response in (("anonymous", anonymous), ("viewer", viewer)):
                    if response.status_code >= 500 or "Traceback" in response.text:
                        problems.append((who, path, response.status_code, response.text[:200]))
                if team and anonymous.status_code != 403:
                    problems.append(("anonymous not refused", path, anonymous.status_code))
                if viewer_ok(path) and viewer.status_code != 200:
                    problems.append(("viewer not served", path, viewer.status_code))
    finally:
        stderr = stop(process)
    assert not problems, problems
    assert "Traceback" not in stderr, stderr[-3000:]
