"""Following a live session: delta.json, the tail page, `datasette capsem tail`, the live panel.

A live writer (generate/live.py, a separate process writing in WAL mode as Capsem does)
appends while HTTP pollers and the CLI tail follow; every row it wrote must reach every
follower, exactly once, and the writer must never fail on a lock. Deadlines only bound hangs.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from datasette_capsem.generate.live import LiveWriter
from datasette_capsem.state import get_state
from datasette_capsem.views.follow import FOLLOW_POLL_SECONDS
from tests.browser import goto, live_server, open_page
from tests.helpers import documentation, make_datasette
from tests.test_live import live_candidate

async_test = pytest.mark.asyncio(loop_scope="session")
ROOT = Path(__file__).resolve().parent.parent
DATASETTE = Path(sys.executable).with_name("datasette")
HANG_GUARD = 60.0
SECRET = "sk-proj-" + "Zq8" * 14
HOSTILE = "<script>alert('x')</script>\x1b[31mRED\u202e"


@pytest.fixture(scope="module")
def home(capsem_home, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("follow") / "home"
    shutil.copytree(capsem_home, path, symlinks=True)
    return path


@pytest.fixture(scope="module")
def session(manifest) -> dict:
    return live_candidate(manifest)


def ledger_ids(path: Path) -> dict[str, set[int]]:
    """Every row id of every table, read independently (immutable: the writer has stopped)."""
    conn = sqlite3.connect(f"file:{path}?immutable=1", uri=True)
    try:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
        return {t: {r[0] for r in conn.execute(f'SELECT id FROM "{t}"')} for t in tables}
    finally:
        conn.close()


def wait_for_writer(ledger: Path) -> None:
    """Until the writer's first commit is in its -wal (the session is visibly live)."""
    deadline = time.monotonic() + HANG_GUARD
    wal = Path(f"{ledger}-wal")
    while not (wal.exists() and wal.stat().st_size > 0):
        assert time.monotonic() < deadline
        time.sleep(0.02)


def cli_env(home: Path, cache: Path) -> dict[str, str]:
    return {
        **os.environ,
        "CAPSEM_HOME": str(home),
        "DATASETTE_CAPSEM_CACHE": str(cache),
        "PYTHONPATH": str(ROOT),
    }


def run_cli(argv: list[str], home: Path, cache: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [str(DATASETTE), *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env(home, cache),
    )


def split_cursor(text: str) -> dict[str, int]:
    return {t: int(i) for t, i in (p.split(":") for p in text.split(",") if p)}


async def poller(datasette, sid: str, cursor: str, seen: dict, stop: asyncio.Event) -> int:
    """One follower polling delta.json until the server says the session stopped."""
    polls = 0
    while True:
        response = await datasette.client.get(
            f"/-/capsem/sessions/{sid}/delta.json", params={"since": cursor}
        )
        assert response.status_code == 200, response.text[:300]
        data = response.json()
        assert not data["gap"]
        for row in data["rows"]:
            key = (row["kind"], row["id"])
            assert key not in seen, f"{key} delivered twice"
            seen[key] = row
        cursor = data["cursor"]
        polls += 1
        if stop.is_set() and not data["live"]:
            return polls
        await asyncio.sleep(0.05)


@async_test
async def test_followers_get_every_new_row_once_and_never_block_the_writer(home, session, tmp_path):
    sid = session["id"]
    ledger = home / session["ledger"]
    datasette = await make_datasette(home, tmp_path / "cache")
    start = (await datasette.client.get(f"/-/capsem/sessions/{sid}/delta.json")).json()
    assert start["rows"] == [] and start["live"] is False
    before = ledger_ids(ledger)
    # The followers must never fall a whole window (WINDOW rows of one table) behind, or the
    # server rightly reports a gap: at 50 rows/s the window spans seconds even on a loaded
    # machine where one poll can take over a second (150 rows/s gapped once under load).
    writer = LiveWriter(home, sid, rate=50, seed=11).start()
    wait_for_writer(ledger)
    # --last covers the whole window: the CLI prints what it finds first, then what follows.
    cli = run_cli(
        ["capsem", "tail", sid, "--json", "--interval", "0.2", "--last", "100000"],
        home,
        tmp_path / "cli-cache",
    )
    stop = asyncio.Event()
    seen: list[dict] = [{}, {}, {}]
    tasks = [asyncio.create_task(poller(datasette, sid, start["cursor"], s, stop)) for s in seen]
    try:
        deadline = time.monotonic() + HANG_GUARD
        while len(seen[0]) < 300:  # enough rows to span several file versions
            assert time.monotonic() < deadline and not any(t.done() for t in tasks)
            await asyncio.sleep(0.1)
        # The overview of a live session has the live panel, drawn at a cursor.
        page = await datasette.client.get(f"/-/capsem/sessions/{sid}")
        assert "data-capsem-follow" in page.text and "capsem-follow.js" in page.text
    finally:
        code = writer.stop()
        stop.set()
    polls = await asyncio.wait_for(asyncio.gather(*tasks), HANG_GUARD)
    out, err = cli.communicate(timeout=HANG_GUARD)
    assert code == 0, "the writer failed (a lock error exits non-zero)"
    assert cli.returncode == 0, err
    assert "not live" in err
    after = ledger_ids(ledger)
    written = {(t, i) for t, ids in after.items() for i in ids - before.get(t, set())}
    assert len(written) > 300
    for follower in seen:
        assert set(follower) == written
    tailed = [(r["kind"], r["id"]) for r in map(json.loads, out.splitlines())]
    assert len(tailed) == len(set(tailed))  # each once
    assert written <= set(tailed), (err, sorted(written - set(tailed))[:20])
    assert all(i in before[t] for t, i in set(tailed) - written)  # older rows: the first look
    # One read per file version however many followers: far fewer reads than polls.
    assert get_state(datasette).follow.computations < sum(polls)
    final = (await datasette.client.get(f"/-/capsem/sessions/{sid}/delta.json")).json()
    assert final["live"] is False
    page = await datasette.client.get(f"/-/capsem/sessions/{sid}")
    assert "data-capsem-follow" not in page.text


@async_test
async def test_many_viewers_of_one_file_version_cost_one_read(home, session, tmp_path):
    sid = session["id"]
    datasette = await make_datasette(home, tmp_path / "cache")
    cache = get_state(datasette).follow
    responses = await asyncio.gather(
        *(
            datasette.client.get(f"/-/capsem/sessions/{sid}/delta.json?since=net_events:0")
            for _ in range(12)
        )
    )
    assert all(r.status_code == 200 for r in responses)
    assert cache.computations == 1
    for _ in range(5):
        await datasette.client.get(f"/-/capsem/sessions/{sid}/tail.json")
    assert cache.computations == 1


@async_test
async def test_tail_lists_newest_first_filters_by_kind_and_rejects_bad_input(
    home, session, tmp_path
):
    sid = session["id"]
    datasette = await make_datasette(home, tmp_path / "cache")
    data = (await datasette.client.get(f"/-/capsem/sessions/{sid}/tail.json")).json()
    keys = [(r["at"] or "", r["id"]) for r in data["rows"]]
    assert keys == sorted(keys, reverse=True) and len(keys) > 10
    ledger = home / session["ledger"]
    conn = sqlite3.connect(f"file:{ledger}?immutable=1", uri=True)
    newest_dns = [
        r[0] for r in conn.execute("SELECT id FROM dns_events ORDER BY id DESC LIMIT 200")
    ]
    conn.close()
    only = await datasette.client.get(
        f"/-/capsem/sessions/{sid}/tail.json", params={"kind": "dns_events"}
    )
    rows = only.json()["rows"]
    assert {r["kind"] for r in rows} == {"dns_events"}
    assert sorted((r["id"] for r in rows), reverse=True) == newest_dns
    html = await datasette.client.get(f"/-/capsem/sessions/{sid}/tail?kind=dns_events")
    assert html.status_code == 200 and "capsem-follow.js" in html.text
    for bad in ("since=x", "since=net_events:1;drop", "since=" + "a:1," * 2000):
        response = await datasette.client.get(f"/-/capsem/sessions/{sid}/delta.json?{bad}")
        assert response.status_code == 400, bad
    response = await datasette.client.get(f"/-/capsem/sessions/{sid}/tail?kind=nope")
    assert response.status_code == 400
    response = await datasette.client.get("/-/capsem/sessions/no-such-session/delta.json")
    assert response.status_code == 404


def plant(ledger: Path) -> None:
    """A row carrying a credential and hostile text, written as a writer would."""
    conn = sqlite3.connect(ledger, isolation_level=None, timeout=5)
    conn.execute(
        "INSERT INTO exec_events (event_id, timestamp, exec_id, command, exit_code, trace_id)"
        " VALUES (?, ?, ?, ?, 0, NULL)",
        (
            "a1b2c3d4e5f6",
            "2099-01-01T00:00:00Z",
            "planted",
            f"{HOSTILE} OPENAI_API_KEY={SECRET}"
            f" curl -H 'Authorization: Bearer {SECRET}' https://x.example/",
        ),
    )
    conn.close()


@async_test
async def test_every_row_shown_is_masked_and_escaped(home, session, tmp_path):
    sid = session["id"]
    ledger = home / session["ledger"]
    datasette = await make_datasette(home, tmp_path / "cache")
    start = (await datasette.client.get(f"/-/capsem/sessions/{sid}/delta.json")).json()
    plant(ledger)
    delta = await datasette.client.get(
        f"/-/capsem/sessions/{sid}/delta.json", params={"since": start["cursor"]}
    )
    assert [r["kind"] for r in delta.json()["rows"]] == ["exec_events"]
    tail = await datasette.client.get(f"/-/capsem/sessions/{sid}/tail")
    tail_json = await datasette.client.get(f"/-/capsem/sessions/{sid}/tail.json")
    for response in (delta, tail, tail_json):
        assert SECRET not in response.text and SECRET[:20] not in response.text
    assert delta.headers["content-type"].startswith("application/json")
    assert "<script>alert" not in tail.text  # JSON carries the text; HTML escapes it
    assert "redacted" in delta.text
    assert "&lt;script&gt;alert(" in tail.text
    # With hide_free_text, a command is hidden whole, in its field and in the summary.
    hiding = await make_datasette(home, tmp_path / "cache-hide", hide_free_text=True)
    hidden = await hiding.client.get(f"/-/capsem/sessions/{sid}/tail.json?kind=exec_events")
    planted = next(r for r in hidden.json()["rows"] if r["id"] == delta.json()["rows"][0]["id"])
    assert planted["fields"]["command"].startswith("[hidden")
    assert "OPENAI_API_KEY" not in planted["summary"] and "alert" not in planted["summary"]
    cli = run_cli(["capsem", "tail", sid, "--last", "3"], home, tmp_path / "cli")
    out, err = cli.communicate(timeout=HANG_GUARD)
    assert cli.returncode == 0, err
    assert SECRET[:20] not in out and "\x1b" not in out and "\u202e" not in out
    assert "\\x1b[31mRED\\u202e" in out


def test_tail_of_an_unknown_session_or_home_is_a_clear_error(home, session, tmp_path):
    cli = run_cli(["capsem", "tail", "no-such-session", "--home", str(home)], home, tmp_path)
    out, err = cli.communicate(timeout=HANG_GUARD)
    assert cli.returncode == 2
    assert "unknown session" in err and "Traceback" not in err and out == ""
    missing = tmp_path / "missing"
    cli = run_cli(["capsem", "tail", session["id"], "--home", str(missing)], home, tmp_path)
    out, err = cli.communicate(timeout=HANG_GUARD)
    assert cli.returncode == 2 and "no Capsem home" in err and "Traceback" not in err
    # A unique id prefix names the session, as in every command.
    cli = run_cli(["capsem", "tail", session["id"][:8], "--last", "1"], home, tmp_path)
    out, err = cli.communicate(timeout=HANG_GUARD)
    assert cli.returncode == 0 and out.strip(), err


def documented() -> list[str]:
    text = documentation()
    found = []
    for block in re.findall(r"```\w*\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            if re.match(r"^datasette capsem tail\b", line.strip()):
                found.append(line.strip())
    return found


def test_the_readme_documents_tail():
    assert len(documented()) >= 2


@pytest.mark.parametrize("command", documented())
@pytest.mark.parametrize("ending", ["stops", "ctrl-c"])
def test_readme_tail_command_runs_as_written(command, ending, home, session, tmp_path):
    """Run as written (ID_OR_NAME is the live session's id): it prints rows while the writer
    writes and exits 0 when the session stops, or on Ctrl-C."""
    argv = shlex.split(command.replace("ID_OR_NAME", session["id"]))
    writer = LiveWriter(home, session["id"], rate=100, seed=23).start()
    try:
        wait_for_writer(home / session["ledger"])
        process = run_cli(argv[1:], home, tmp_path / "cache")
        deadline = time.monotonic() + HANG_GUARD
        # It has read the ledger: its first row is out (a bounded wait, in a thread).
        with ThreadPoolExecutor(1) as pool:
            first = pool.submit(process.stdout.readline).result(timeout=HANG_GUARD)
        assert first.strip()
        if ending == "ctrl-c":  # while the writer still writes: only Ctrl-C can end it
            process.send_signal(signal.SIGINT)
            out, err = process.communicate(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        assert writer.stop() == 0, writer.errors
    if ending == "stops":
        out, err = process.communicate(timeout=max(1.0, deadline - time.monotonic()))
    assert process.returncode == 0, err
    assert "Traceback" not in err
    # Ctrl-C ended it, not the session's stop (which it would report).
    assert ("not live" in err) == (ending == "stops"), err


@pytest.mark.heavy  # tens of seconds: its module is scheduled first (conftest.py)
@async_test
async def test_browser_sees_new_rows_arrive_without_reload_and_following_stops(
    browser, home, session, tmp_path
):
    sid = session["id"]
    ledger = home / session["ledger"]
    writer = LiveWriter(home, sid, rate=60, seed=31).start()
    try:
        wait_for_writer(ledger)
        with live_server(home, tmp_path / "cache", index_refresh_seconds=0) as base:
            page, problems = await open_page(browser, f"{base}/-/versions.json", fresh=True)
            # The page's clock is Playwright's: the live panel's next poll (every
            # FOLLOW_POLL_SECONDS) is fired at once, where a real clock waited it out, twice.
            await page.clock.install()
            await goto(page, f"{base}/-/capsem/sessions/{sid}")
            try:
                assert await page.locator("[data-capsem-follow]").count() == 1
                marker = page.locator("h1")
                await marker.evaluate("node => node.setAttribute('data-no-reload', '1')")
                before = await page.locator("[data-capsem-count='model_items']").inner_text()
                # New rows appear, highlighted, in the same page.
                new_rows = page.locator("[data-capsem-follow] tbody tr.capsem-new")
                await next_polls(page, lambda: new_rows.count())
                assert await marker.get_attribute("data-no-reload") == "1"  # same document
                # The overview's row count grows in place (polled through a locator: the
                # page's CSP forbids the string evaluation wait_for_function would need).
                count = page.locator("[data-capsem-count='model_items']")
                await next_polls(page, lambda: count.inner_text(), lambda text: text != before)
                assert writer.stop() == 0, writer.errors
                stopped = page.locator("[data-capsem-follow][data-state='stopped']")
                await next_polls(page, lambda: stopped.count())
                assert await marker.get_attribute("data-no-reload") == "1"  # same document
                hrefs = await page.eval_on_selector_all(
                    "[data-capsem-follow] tbody a", "els => els.map(e => e.getAttribute('href'))"
                )
                assert hrefs and all(h.startswith(f"/-/capsem/sessions/{sid}/rows/") for h in hrefs)
                assert not problems, problems  # CSP violations and script errors included
            finally:
                await page.close()
    finally:
        writer.stop()


async def next_polls(page, read, done=bool) -> None:
    """Until `done(await read())`: the page's clock is moved on a poll interval at a time (its
    timers fire, its fetches are real); the deadline bounds a hang only."""
    deadline = time.monotonic() + HANG_GUARD
    while not done(await read()):
        assert time.monotonic() < deadline
        await page.clock.fast_forward(FOLLOW_POLL_SECONDS * 1000)
        await asyncio.sleep(0.05)


@async_test
async def test_a_live_trace_page_follows_its_own_rows(home, session, tmp_path):
    sid = session["id"]
    datasette = await make_datasette(home, tmp_path / "cache")
    start = (await datasette.client.get(f"/-/capsem/sessions/{sid}/delta.json")).json()
    writer = LiveWriter(home, sid, rate=100, seed=41).start()
    try:
        wait_for_writer(home / session["ledger"])
        deadline = time.monotonic() + HANG_GUARD
        trace_id = None
        while trace_id is None:
            assert time.monotonic() < deadline
            data = (
                await datasette.client.get(
                    f"/-/capsem/sessions/{sid}/delta.json", params={"since": start["cursor"]}
                )
            ).json()
            trace_id = next(
                (
                    r["trace_id"]
                    for r in data["rows"]
                    if r["kind"] == "model_calls" and r["trace_id"] and len(r["trace_id"]) == 36
                ),
                None,
            )
            await asyncio.sleep(0.1)
        page = await datasette.client.get(f"/-/capsem/sessions/{sid}/traces/{trace_id}")
        assert page.status_code == 200
        assert "data-capsem-follow" in page.text and f"trace_id={trace_id}" in page.text
        only = await datasette.client.get(
            f"/-/capsem/sessions/{sid}/delta.json",
            params={"since": start["cursor"], "trace_id": trace_id},
        )
        rows = only.json()["rows"]
        assert rows and {r["trace_id"] for r in rows} == {trace_id}
        # At least what the unfiltered answer held of it (more may have arrived since).
        assert len(rows) >= sum(1 for r in data["rows"] if r["trace_id"] == trace_id)
    finally:
        assert writer.stop() == 0, writer.errors
    page = await datasette.client.get(f"/-/capsem/sessions/{sid}/traces/{trace_id}")
    assert "data-capsem-follow" not in page.text
