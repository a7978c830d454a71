"""The first index build of one home beside the sqlite3 CLI reading the same rows (issue 29).

For a home (a path, e.g. benchmarks/out/scale-10000, or `scale_home.py`'s size), runs in turn,
`--repeat` times, so both sides see the same load:
- `datasette capsem index --home H --cache-dir C` (a subprocess, C an empty temporary cache):
  the whole first build, catalog scan, ledger reads in worker processes, quick check of every
  session, index writes and the stored quick reports;
- the sqlite3 shell replaying the statements that build sent (`bench_sessions.build_script`:
  SQLite's trace callback on every ledger connection the build opened, `.open` of the same
  URI, every statement with its bound values: extraction, search text, and the quick check's
  statements, `PRAGMA quick_check` included; only the blake3 body-hash statements are left
  out, as the shell lacks the function). The shell only reads: the build also masks what it
  read, writes index.db and stores a quick report per ledger.
- with `--server`, also a Datasette server over the home with an empty cache, from spawn until
  its background build says it is done (`/-/capsem/index.json`), as `bench_scale.py` measures;
- with `--python-replay`, also Python's sqlite3 module running the same script
  (`_python_replay.py`: each statement executed and its rows fetched, nothing else): what the
  statements cost from Python, the floor under the build's own Python work.

The captured script is kept in benchmarks/out/<home>.<digest>.build.sql, the digest naming the
home's path and the plugin's source (so a changed build is captured again, and a script never
names the files of another checkout). Wall seconds and CPU seconds (user + system, the
build's worker processes included) of each run are printed, with the load average.

With `--before DIR` (a checkout of another commit, e.g. `git archive main | tar -x -C DIR`),
that checkout's build is timed in the same turns, against the same CLI replay.

Usage: python benchmarks/bench_build.py HOME [--repeat 3] [--server] [--before DIR]
       [--python-replay]
       python benchmarks/bench_build.py 10000            (benchmarks/out/scale-10000)
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from bench_check import children_cpu, cli_run, load, sqlite3_cli
from bench_sessions import build_script
from common import HERE, OUT, free_port, print_table, wait_for_index

import datasette_capsem

PACKAGE = Path(datasette_capsem.__file__).parent


def source_digest(home: Path) -> str:
    digest = hashlib.blake2b(str(home.resolve()).encode(), digest_size=8)
    for path in sorted(PACKAGE.rglob("*")):
        if path.suffix in (".py", ".sql", ".json") and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(PACKAGE)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


# Captures the statements of the plugin at argv[1] (`captured(home, source)`).
CAPTURE_BOOT = (
    "import sys; sys.meta_path[:] = [f for f in sys.meta_path "
    "if 'editable' not in repr(f).lower()]; sys.path.insert(0, sys.argv[1]); "
    "sys.path.insert(1, sys.argv[2]); "
    "import datasette_capsem; assert datasette_capsem.__file__.startswith(sys.argv[1]); "
    "import bench_build; from pathlib import Path; "
    "print(bench_build.captured_file(Path(sys.argv[3])))"
)


def captured(home: Path, source: Path | None = None) -> tuple[str, int]:
    """The CLI script of the statements a build of `home` sends (and how many), by this
    checkout's plugin or, with `source`, by that checkout's (captured in a subprocess)."""
    if source is None:
        kept = captured_file(home)
    else:
        done = subprocess.run(
            [sys.executable, "-c", CAPTURE_BOOT, str(source), str(HERE), str(home)],
            capture_output=True,
            text=True,
            check=True,
        )
        kept = Path(done.stdout.strip().splitlines()[-1])
    text = kept.read_text()
    return text, int(text.split("\n", 1)[0].split(":")[1])


def captured_file(home: Path) -> Path:
    kept = OUT / f"{home.name}.{source_digest(home)}.build.sql"
    if not kept.exists():
        capture = Path(tempfile.mkdtemp(prefix="bench-build-capture-"))
        try:
            print(f"capturing the build's statements for {home} ...", file=sys.stderr)
            script, count = build_script(home, capture)
        finally:
            shutil.rmtree(capture, ignore_errors=True)
        OUT.mkdir(exist_ok=True)
        kept.write_text(f"-- statements: {count}\n{script}")
    return kept


# Runs `datasette` with the plugin imported from argv[1] (see build_once).
BEFORE_BOOT = (
    "import sys; sys.meta_path[:] = [f for f in sys.meta_path "
    "if 'editable' not in repr(f).lower()]; sys.path.insert(0, sys.argv.pop(1)); "
    "sys.argv[0] = 'datasette'; "
    "import datasette_capsem; assert datasette_capsem.__file__.startswith(sys.path[0]); "
    "from datasette.cli import cli; cli()"
)


def build_once(home: Path, source: Path | None = None) -> tuple[float, float, str]:
    """(wall s, CPU s, what it said) of one `datasette capsem index` into an empty cache;
    `source`: a checkout of the plugin to run instead of this one (put first on PYTHONPATH)."""
    env = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="bench-build-") as cache:
        command = [sys.executable, "-m", "datasette", "capsem", "index"]
        if source is not None:
            # Not PYTHONPATH: an editable install (`pip install -e`) finds the package through
            # a finder on sys.meta_path, before any sys.path entry, so PYTHONPATH alone ran
            # this checkout's build as the "before" one too.
            command[1:3] = ["-c", BEFORE_BOOT, str(source)]
        command += ["--home", str(home), "--cache-dir", cache]
        before, started = children_cpu(), time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, check=True, env=env)
        return time.perf_counter() - started, children_cpu() - before, done.stdout.strip()


def python_replay(home: Path) -> tuple[float, float]:
    """(wall s, CPU s) of Python's sqlite3 running the statements the build of `home` sent
    (not of splitting the script into them)."""
    command = [sys.executable, str(HERE / "_python_replay.py"), str(captured_file(home))]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    cpu, wall, _refused = done.stdout.split()
    return float(wall), float(cpu)


def server_build(home: Path) -> float:
    """Seconds from spawning a server over an empty cache until its first build is done."""
    with tempfile.TemporaryDirectory(prefix="bench-build-server-") as cache:
        port = free_port()
        began = time.perf_counter()
        process = subprocess.Popen(
            [sys.executable, str(HERE / "_server.py"), "--port", str(port)]
            + ["--home", str(home), "--cache", cache],
            stdout=subprocess.DEVNULL,
        )
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
                while True:  # until it listens
                    try:
                        client.get("/-/versions.json")
                        break
                    except httpx.HTTPError:
                        if process.poll() is not None:
                            raise RuntimeError("the server ended") from None
                        time.sleep(0.05)
                wait_for_index(client, seconds=7200)
                return time.perf_counter() - began
        finally:
            process.terminate()
            process.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("home", help="a Capsem home, or a size of scale_home.py's homes")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--server", action="store_true", help="also the build in a server")
    parser.add_argument(
        "--python-replay",
        action="store_true",
        help="also Python's sqlite3 running the same statements (and nothing else)",
    )
    parser.add_argument(
        "--before",
        type=Path,
        help="a checkout of the plugin (e.g. `git archive` of main) whose build is timed too, "
        "in turn with this one's, against the same CLI replay (this checkout's statements)",
    )
    args = parser.parse_args()
    home = Path(args.home) if not args.home.isdigit() else OUT / f"scale-{args.home}"
    if not home.is_dir():
        sys.exit(f"no home at {home} (make it with scale_home.py)")
    script, statements = captured(home)
    before_script, before_statements = captured(home, args.before) if args.before else ("", 0)
    cli = sqlite3_cli()
    loads, builds, build_cpu, shells, shell_cpu, servers = [], [], [], [], [], []
    pythons, python_cpu = [], []
    befores, before_cpu, before_shells, before_shell_cpu = [], [], [], []
    said = ""
    for _ in range(args.repeat):
        loads.append(load())
        if args.before:
            wall, cpu, _said = build_once(home, args.before.resolve())
            befores.append(wall)
            before_cpu.append(cpu)
            before = children_cpu()
            before_shells.append(cli_run(cli, [":memory:"], before_script))
            before_shell_cpu.append(children_cpu() - before)
        wall, cpu, said = build_once(home)
        builds.append(wall)
        build_cpu.append(cpu)
        before = children_cpu()
        shells.append(cli_run(cli, [":memory:"], script))
        shell_cpu.append(children_cpu() - before)
        if args.python_replay:
            wall, cpu = python_replay(home)
            pythons.append(wall)
            python_cpu.append(cpu)
        if args.server:
            servers.append(server_build(home))
    loads.append(load())

    def each(values):
        return ", ".join(f"{v:.1f}" for v in values)

    ledgers = max(1, script.count("\n.open '") + script.startswith(".open '"))

    def per_ledger(cpu):
        return f"{statistics.median(cpu) / ledgers * 1000:.2f}" if cpu else ""

    ratio = statistics.median(builds) / statistics.median(shells)
    rows = [
        [
            "sqlite3 CLI, same reads",
            each(shells),
            each(shell_cpu),
            "1.00x",
            "",
            per_ledger(shell_cpu),
        ]
    ]
    if pythons:
        rows.append(
            [
                "Python's sqlite3, same statements",
                each(pythons),
                each(python_cpu),
                f"{statistics.median(pythons) / statistics.median(shells):.2f}x",
                ", ".join(f"{p / s:.2f}" for p, s in zip(pythons, shells, strict=True)),
                per_ledger(python_cpu),
            ]
        )
    if befores:
        rows.append(
            [
                f"sqlite3 CLI, {args.before.name}'s {before_statements:,} statements",
                each(before_shells),
                each(before_shell_cpu),
                f"{statistics.median(before_shells) / statistics.median(shells):.2f}x",
                "",
                per_ledger(before_shell_cpu),
            ]
        )
        rows.append(
            [
                f"datasette capsem index of {args.before.name}",
                each(befores),
                each(before_cpu),
                f"{statistics.median(befores) / statistics.median(shells):.2f}x",
                ", ".join(f"{b / s:.2f}" for b, s in zip(befores, shells, strict=True)),
                per_ledger(before_cpu),
            ]
        )
    rows += [
        [
            "datasette capsem index",
            each(builds),
            each(build_cpu),
            f"{ratio:.2f}x",
            ", ".join(f"{b / s:.2f}" for b, s in zip(builds, shells, strict=True)),
            per_ledger(build_cpu),
        ],
    ]
    if servers:
        rows.append(
            [
                "server's background build",
                each(servers),
                "",
                f"{statistics.median(servers) / statistics.median(shells):.2f}x",
                ", ".join(f"{b / s:.2f}" for b, s in zip(servers, shells, strict=True)),
                "",
            ]
        )
    print_table(
        f"First index build of {home.name} vs the sqlite3 CLI ({statements:,} statements; "
        f"{os.cpu_count()} cores; load before each run and after: {' | '.join(loads)})",
        [
            "what",
            "wall s (each run)",
            "CPU s (each run)",
            "median ratio",
            "same-run ratios",
            f"CPU ms a ledger ({ledgers:,})",
        ],
        rows,
    )
    print(said)


if __name__ == "__main__":
    main()
