"""Reading while Capsem writes: a live writer appends in WAL mode while the instance is crawled."""

from __future__ import annotations

import asyncio
import time

import pytest

from datasette_capsem.generate.live import LiveWriter
from tests.helpers import make_datasette, session_in

async_test = pytest.mark.asyncio(loop_scope="session")


def live_candidate(manifest: dict) -> dict:
    return session_in(
        manifest, era="head", kind="ephemeral", has=("clean", "main_db_row"), lacks=("live",)
    )


async def model_call_count(datasette, session_id: str) -> int:
    sql = "select count(*) as n from model_calls"
    # 1.0 redirects /<db>.json?sql= to /<db>/-/query.json: followed, as a client does
    response = await datasette.client.get(
        f"/{session_id}.json", params={"sql": sql, "_shape": "arrays"}, follow_redirects=True
    )
    assert response.status_code == 200, response.text[:300]
    return response.json()["rows"][0][0]


@async_test
async def test_a_concurrent_crawl_never_fails_and_sees_new_rows(manifest, tmp_path, private_home):
    home = private_home
    session = live_candidate(manifest)
    sid = session["id"]
    datasette = await make_datasette(home, tmp_path / "cache", view_secrets=True)
    pages = [
        f"/{sid}",
        f"/{sid}/model_calls?_size=5",
        f"/{sid}/tool_calls.json?_size=5",
        f"/{sid}/net_events.json?_shape=array&_size=5",
        f"/-/capsem/sessions/{sid}",
        f"/-/capsem/sessions/{sid}.json",
        f"/-/capsem/sessions/{sid}/check.json",
        "/",
    ]
    ledger = home / session["ledger"]
    beside = sorted(p.name for p in ledger.parent.iterdir())  # said if the writer fails
    initial = await model_call_count(datasette, sid)
    statuses: list[tuple[str, int]] = []
    writer = LiveWriter(home, sid, rate=400, seed=3).start()
    try:
        # Crawl for at least 6 s while the writer writes, and on until its new rows are
        # seen (60 s bounds a hang only: no time is asserted).
        started = time.monotonic()
        seen_growth = False
        while time.monotonic() - started < (6 if seen_growth else 60):
            for page in pages:
                statuses.append((page, (await datasette.client.get(page)).status_code))
            if not seen_growth:
                seen_growth = await model_call_count(datasette, sid) > initial
            await asyncio.sleep(0.01)
    finally:
        exit_code = writer.stop()
    assert exit_code == 0, f"the writer failed ({beside}): {writer.errors[-2000:]}"
    failures = [(page, status) for page, status in statuses if status != 200]
    assert not failures, failures
    assert seen_growth, "the crawl saw the writer's new rows"
    final = await model_call_count(datasette, sid)
    assert final > initial
    # The writer's clean stop checkpointed and removed -wal and -shm: no idle reader of ours
    # held them open. Reads go on without them.
    assert not ledger.with_name("session.db-wal").exists()
    assert not ledger.with_name("session.db-shm").exists()
    assert (await datasette.client.get(f"/{sid}/model_calls.json")).status_code == 200
