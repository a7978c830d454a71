"""`datasette capsem demo` and `serve`: from install to a browsable instance in one command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from datasette_capsem.generate import GenerateOptions, generate_home
from tests.helpers import sessions_in
from tests.security_support import free_port, wait_for


def run_cli(args: list[str], env: dict[str, str]):
    port = free_port()
    datasette = Path(sys.executable).with_name("datasette")
    process = subprocess.Popen(
        [str(datasette), "capsem", *args, "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return process, f"http://127.0.0.1:{port}"


@pytest.fixture
def isolated_env(tmp_path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(HOME=str(tmp_path / "user"), XDG_CACHE_HOME=str(tmp_path / "cache"))
    env.pop("CAPSEM_HOME", None)
    env.pop("CAPSEM_RUN_DIR", None)
    return env


def test_demo_generates_a_home_in_the_cache_and_marks_it(isolated_env, tmp_path):
    process, base = run_cli(["demo"], isolated_env)
    try:
        page = wait_for(base + "/", process)
        assert page.status_code == 200
        assert "Demo data" in page.text
        assert "Capsem sessions" in page.text
    finally:
        process.terminate()
        process.wait(timeout=10)
    assert list((tmp_path / "cache" / "datasette-capsem").glob("demo-home-*/manifest.json"))


def test_serve_serves_the_real_home_when_there_is_one(isolated_env, tmp_path):
    home = tmp_path / "user" / ".capsem"
    manifest = generate_home(home, GenerateOptions(sessions=3, hostile=False, broken=False))
    process, base = run_cli(["serve"], isolated_env)
    try:
        page = wait_for(base + "/-/capsem/sessions.json?_size=max&all=1", process)
        listed = {s["id"] for s in page.json()["sessions"]}
        assert {s["id"] for s in sessions_in(manifest, has=("main_db_row",))} <= listed
        assert "Demo data" not in httpx.get(base + "/").text
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_serve_with_metadata_uses_its_home_and_the_settings_beside_it(isolated_env, tmp_path):
    home = tmp_path / "team-home"
    manifest = generate_home(home, GenerateOptions(sessions=2, hostile=False, broken=False))
    config = tmp_path / "instance"
    config.mkdir()
    (config / "metadata.yml").write_text(
        f"plugins:\n  datasette-capsem:\n    capsem_home: {home}\n    view_secrets: true\n"
    )
    (config / "settings.json").write_text('{"max_returned_rows": 123}')
    process, base = run_cli(["serve", "-m", str(config / "metadata.yml")], isolated_env)
    try:
        listed = wait_for(base + "/-/capsem/sessions.json?_size=max&all=1", process).json()
        assert {s["id"] for s in sessions_in(manifest, has=("main_db_row",))} <= {
            s["id"] for s in listed["sessions"]
        }
        assert httpx.get(base + "/-/settings.json").json()["max_returned_rows"] == 123
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_serve_rejects_a_broken_metadata_file_with_one_clear_line(isolated_env, tmp_path):
    bad = tmp_path / "metadata.yml"
    bad.write_text("plugins: [unclosed")
    datasette = Path(sys.executable).with_name("datasette")
    result = subprocess.run(
        [str(datasette), "capsem", "serve", "-m", str(bad)],
        env=isolated_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "cannot read" in result.stderr and "Traceback" not in result.stderr
