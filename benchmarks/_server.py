"""Start one Datasette server for a benchmark: the plugin over a home, or plain Datasette.

python benchmarks/_server.py --home HOME --port P [--cache DIR] [--index-refresh-seconds 0]
python benchmarks/_server.py --plain FILE.db --port P      (plugin unregistered)
"""

from __future__ import annotations

import argparse
import ctypes
import json
import threading
from pathlib import Path

import uvicorn
from datasette.app import Datasette
from datasette.plugins import pm

PR_SET_NAME = 15  # prctl option, from linux/prctl.h


def _name_os_threads() -> None:
    """Each thread's Python name as the OS's too (/proc/PID/task/TID/comm, 15 bytes): what
    common.request_cpu_seconds tells the threads that serve requests by. Python 3.11 does
    not set it itself."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return
    bootstrap = threading.Thread._bootstrap_inner  # type: ignore[attr-defined]

    def named(self) -> None:
        prctl(PR_SET_NAME, self.name.encode("utf-8", "replace")[:15], 0, 0, 0)
        bootstrap(self)

    threading.Thread._bootstrap_inner = named  # type: ignore[attr-defined]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--home")
    parser.add_argument("--cache")
    parser.add_argument("--plain")
    parser.add_argument("--max-mounted", type=int, default=32)
    parser.add_argument("--redact", action="store_true", help="mask secrets, as a team instance")
    parser.add_argument("--settings", help="a settings.json, e.g. the repository's team settings")
    parser.add_argument(
        "--index-refresh-seconds", type=float, help="0: no background index refresh"
    )
    args = parser.parse_args()
    _name_os_threads()
    if args.plain:
        plugin = pm.get_plugin("capsem")
        if plugin is not None:
            pm.unregister(plugin)
        datasette = Datasette([args.plain])
    else:
        config = {
            "capsem_home": args.home,
            "max_mounted_sessions": args.max_mounted,
            "view_secrets": True,
        }
        if args.redact:  # a team instance: secrets masked for everyone
            del config["view_secrets"]
        if args.cache:
            config["cache_dir"] = args.cache
        if args.index_refresh_seconds is not None:
            config["index_refresh_seconds"] = args.index_refresh_seconds
        settings = json.loads(Path(args.settings).read_text()) if args.settings else {}
        datasette = Datasette(metadata={"plugins": {"datasette-capsem": config}}, settings=settings)
    uvicorn.run(datasette.app(), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
