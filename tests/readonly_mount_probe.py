"""Run inside a private mount namespace (see test_readonly_mount.py): bind the home read-only,
serve it, and print one JSON line of what each kind of ledger answered."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from tests.helpers import make_datasette


async def probe(home: Path, cache: Path, session_ids: list[str]) -> dict[str, object]:
    datasette = await make_datasette(home, cache, view_secrets=True, index_refresh_seconds=0)
    answers: dict[str, object] = {}
    for session_id in session_ids:
        sql = "select count(*) from model_calls"
        # 1.0 redirects /<db>.json?sql= to /<db>/-/query.json (followed, as a client does)
        # and gives rows as objects unless asked for arrays
        response = await datasette.client.get(
            f"/{session_id}.json",
            params={"sql": sql, "_shape": "arrays"},
            follow_redirects=True,
        )
        body = response.json()
        answers[session_id] = body["rows"][0][0] if response.status_code == 200 else body
    answers["/"] = (await datasette.client.get("/")).status_code
    return answers


def main() -> None:
    source, target, cache, *session_ids = sys.argv[1:]
    subprocess.run(["mount", "--bind", source, target], check=True)
    subprocess.run(["mount", "-o", "remount,bind,ro", target], check=True)
    print(json.dumps(asyncio.run(probe(Path(target), Path(cache), session_ids))))


if __name__ == "__main__":
    main()
