"""Documented commands are tested commands: every `push-otlp` command of the README runs here
as written, against a real OTLP/HTTP receiver (tests/otlp_receiver.py).

Only what cannot be used on a test machine is substituted: the endpoint's host and port (the
receiver's free port instead of 4318 or 6006) and the `datasette` executable (this
virtualenv's); CAPSEM_HOME is a generated home and the cache a temporary folder. A `--follow`
command runs until the receiver has the home's spans, then gets Ctrl-C (SIGINT).
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from datasette_capsem.generate import generate_home
from tests.helpers import documentation
from tests.otlp_receiver import Receiver
from tests.test_push_otlp import HANG_GUARD, ROOT_NAMES, clean_options

ROOT = Path(__file__).resolve().parent.parent
DATASETTE = Path(sys.executable).with_name("datasette")
ENDPOINT = re.compile(r"http://127\.0\.0\.1:\d+")


def documented() -> list[str]:
    text = documentation()
    found = []
    for block in re.findall(r"```\w*\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            if re.match(r"^(?:\S*/)?datasette capsem push-otlp\b", line.strip()):
                found.append(line.strip())
    return found


def test_the_readme_documents_push_commands():
    commands = documented()
    assert len(commands) >= 3
    assert any("--follow" in c for c in commands) and any("--header" in c for c in commands)


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("readme-push") / "home"
    generate_home(path, clean_options(seed=3))
    return path


@pytest.mark.parametrize("command", documented())
def test_readme_push_command_runs_as_written(command, home, tmp_path):
    with Receiver() as receiver:
        argv = shlex.split(ENDPOINT.sub(receiver.base_url, command))
        assert argv[0] == "datasette"
        argv[0] = str(DATASETTE)
        env = {
            **os.environ,
            "CAPSEM_HOME": str(home),
            "DATASETTE_CAPSEM_CACHE": str(tmp_path / "cache"),
            "PYTHONPATH": str(ROOT),
        }
        process = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        try:
            if "--follow" in argv:
                deadline = time.monotonic() + HANG_GUARD
                while not any(s.name in ROOT_NAMES for s in receiver.spans):
                    assert process.poll() is None, process.communicate()
                    assert time.monotonic() < deadline
                    time.sleep(0.1)
                time.sleep(1)
                process.send_signal(signal.SIGINT)
            out, err = process.communicate(timeout=HANG_GUARD)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        assert process.returncode == 0, out + err
        assert "Traceback" not in err
        assert receiver.spans and "spans:" in out
        if "--header" in argv:
            assert all(r["status"] == 200 for r in receiver.requests)
        label = argv[argv.index("--home-label") + 1] if "--home-label" in argv else home.name
        assert {s.resource["capsem.home"] for s in receiver.spans} == {label}
        kinds = {r["content_type"] for r in receiver.requests}
        assert kinds == {"application/json" if "--json" in argv else "application/x-protobuf"}
