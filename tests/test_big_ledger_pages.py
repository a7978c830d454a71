"""Issue 29 (one big ledger): the pages whose cost grows with the whole file do that work once
per file version, not on every view: the overview's aggregates and the check page's report
are read back from memory or the plugin's store while the ledger is unchanged, and computed
again once it changes. Counted (reads, runs, loads), never timed."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import sqlite3
from pathlib import Path

import pytest
from datasette.version import __version__ as datasette_version

from datasette_capsem import redaction
from datasette_capsem.checks import check_session
from datasette_capsem.checks.profiles import FULL, ROWS
from datasette_capsem.graph import events, trace_rows
from datasette_capsem.ledger.schema import read_schema
from datasette_capsem.mount import ledger_db
from datasette_capsem.state import get_state
from datasette_capsem.views import event as event_view
from datasette_capsem.views import pending as pending_view
from datasette_capsem.views import trace as trace_view
from datasette_capsem.views.integrity import report_cache
from datasette_capsem.views.trace_cache import trace_store
from tests.helpers import actor_cookies, make_datasette, until
from tests.trace_support import clean_current, ledger, readable, session_url, trace_url

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest.fixture(scope="module")
def home(capsem_home, tmp_path_factory) -> Path:
    """A copy of the generated home this module may write into."""
    copy = tmp_path_factory.mktemp("big-ledger-pages") / "home"
    shutil.copytree(capsem_home, copy, symlinks=True)
    return copy


def add_file_event(ledger: Path, path: str) -> None:
    conn = sqlite3.connect(ledger)
    try:
        conn.execute(
            "INSERT INTO fs_events (timestamp, action, path) VALUES (?, 'created', ?)",
            ("2026-07-01T00:00:00Z", path),
        )
        conn.commit()
    finally:
        conn.close()


async def saved(store, count: int = 1) -> None:
    for _ in range(500):
        if store.saved >= count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"nothing stored in {store.directory}")


def counted_map_reads(monkeypatch, ledger_file: Path) -> list[int]:
    """A list that gets an item each time the event id map of `ledger_file` is read
    (`event_view.locate_events`, which still reads it). Reads of other files are not
    counted: a server of an earlier test (a browser test's, in another thread) may still
    answer a page of its own home while this test lowers `BIG_LEDGER_BYTES`."""
    runs: list[int] = []
    locate = event_view.locate_events
    wanted = ledger_file.resolve()

    def counting(conn, schema):
        main_file = conn.execute("PRAGMA database_list").fetchone()[2]
        if Path(main_file).resolve() == wanted:
            runs.append(1)
        return locate(conn, schema)

    monkeypatch.setattr(event_view, "locate_events", counting)
    return runs


async def map_reads_reach(runs: list[int], count: int) -> None:
    """Until `counted_map_reads` has counted `count` reads (a map is read in the background)."""

    async def reached() -> bool:
        return len(runs) >= count

    await until(reached, f"{count} reads of the event id map")


async def past_202(datasette, url: str):
    """The answer to `url` once it is no longer a 202 "being computed" page (asked again every
    10 ms, at most 1,000 times: the last answer if it never is)."""
    for _ in range(1000):
        response = await datasette.client.get(url)
        if response.status_code != 202:
            break
        await asyncio.sleep(0.01)
    return response


async def test_overview_reads_its_aggregates_once_per_file_version(home, manifest, tmp_path):
    session = clean_current(manifest)[0]
    datasette = await make_datasette(home, tmp_path / "cache", index_refresh_seconds=0)
    pages = get_state(datasette).pages
    first = (await datasette.client.get(session_url(session["id"], ".json"))).json()
    assert pages.runs == 1
    again = (await datasette.client.get(session_url(session["id"], ".json"))).json()
    assert pages.runs == 1 and pages.hits >= 1
    for part in ("counts", "stats", "traces", "providers", "traces_total"):
        assert again[part] == first[part]
    html = await datasette.client.get(session_url(session["id"]))
    assert html.status_code == 200 and pages.runs == 1

    # A restarted server over the same cache reads the stored answer instead of the ledger
    # (written off the event loop: wait for it).
    await saved(trace_store(datasette))
    restarted = await make_datasette(home, tmp_path / "cache", index_refresh_seconds=0)
    store = trace_store(restarted)
    loaded = store.loaded
    reread = (await restarted.client.get(session_url(session["id"], ".json"))).json()
    assert store.loaded == loaded + 1
    for part in ("counts", "stats", "traces", "providers", "traces_total"):
        assert reread[part] == first[part]

    # A changed file is read again: the new row is counted.
    add_file_event(home / session["ledger"], "/work/after.txt")
    changed = (await datasette.client.get(session_url(session["id"], ".json"))).json()
    assert pages.runs == 2
    assert changed["counts"]["fs_events"] == first["counts"]["fs_events"] + 1


async def test_check_page_runs_the_rule_book_once_per_file_version(home, manifest, tmp_path):
    session = clean_current(manifest)[1]
    url = session_url(session["id"], "/check")
    datasette = await make_datasette(home, tmp_path / "cache", index_refresh_seconds=0)
    reports = report_cache(datasette)
    first = await datasette.client.get(url + ".json")
    assert first.status_code == 200 and reports.runs == 1
    for _ in range(2):
        again = await datasette.client.get(url + ".json")
        assert again.json() == first.json()
    html = await datasette.client.get(url)
    assert html.status_code == 200 and "Integrity report" in html.text
    assert reports.runs == 1

    # A restarted server reads the stored report back instead of running the checks.
    await saved(reports.store)
    restarted = await make_datasette(home, tmp_path / "cache", index_refresh_seconds=0)
    reread = await restarted.client.get(url + ".json")
    assert reread.json() == first.json()
    assert report_cache(restarted).runs == 0 and report_cache(restarted).loaded == 1

    # A changed file is checked again.
    add_file_event(home / session["ledger"], "/work/checked-again.txt")
    changed = await datasette.client.get(url + ".json")
    assert reports.runs == 2
    assert changed.json()["tables"]["fs_events"] == first.json()["tables"]["fs_events"] + 1


async def test_a_big_ledger_being_checked_answers_at_once_and_says_so(
    home, manifest, tmp_path, monkeypatch
):
    """On a cold store, a ledger over the size bound is checked in the background: a view
    that comes before the report gets a 202 saying it is being checked (HTML that reloads
    itself, JSON that says `checking`), and the report once the run is done."""
    session = clean_current(manifest)[2]
    url = session_url(session["id"], "/check")
    datasette = await make_datasette(home, tmp_path / "cache", index_refresh_seconds=0)
    monkeypatch.setattr(ledger_db, "BIG_LEDGER_BYTES", 0)
    monkeypatch.setattr(pending_view, "WAIT_SECONDS", 0)
    page = await datasette.client.get(url)
    assert page.status_code == 202
    assert "Being computed" in page.text and "integrity check" in page.text
    assert 'http-equiv="refresh"' in page.text
    for _ in range(1000):  # the run goes on after the views answered, as the page reloads
        done = await datasette.client.get(url + ".json")
        if done.status_code != 202:
            break
        assert done.json()["checking"] is True
        assert done.json()["session"]["id"] == session["id"]
        await asyncio.sleep(0.01)
    assert done.status_code == 200 and done.json()["verdict"]
    assert report_cache(datasette).runs == 1  # one run for every view that asked meanwhile
    # Run on a connection of its own, the report is the one the mounted file's gives.
    monkeypatch.undo()
    other = await make_datasette(home, tmp_path / "other-cache", index_refresh_seconds=0)
    expected = (await other.client.get(url + ".json")).json()
    assert without_duration(done.json()) == without_duration(expected)


FACETS = ("provider", "model", "kind", "tool_name")


async def test_facet_counts_run_once_per_file_version_and_reader_policy(home, manifest, tmp_path):
    """A table page's facet counts of a stopped session are kept per file version and reader
    policy: a second view runs none (same counts), another policy runs its own, and a
    changed file is counted again."""
    session = clean_current(manifest)[3]
    datasette = await make_datasette(
        home, tmp_path / "cache", index_refresh_seconds=0, view_secrets={"id": "operator"}
    )
    url = f"/{session['id']}/model_items.json?" + "&".join(f"_facet={f}" for f in FACETS)
    url += "&_extra=facet_results"
    first = await datasette.client.get(url)
    assert first.status_code == 200, first.text[:300]
    database = datasette.get_database(session["id"])
    runs = database.facet_runs
    assert runs == len(FACETS)
    counts = facet_counts(first.json())
    assert set(counts) == set(FACETS) and all(counts.values())
    again = await datasette.client.get(url)
    assert facet_counts(again.json()) == counts
    assert database.facet_runs == runs
    html = await datasette.client.get(url.replace(".json", ""))
    assert html.status_code == 200 and database.facet_runs == runs
    # Its facet suggestions (a statement per column) too: run by the first HTML view only.
    suggestions = database.suggestion_runs
    assert suggestions > 0 and "suggested-facets" in html.text
    html_again = await datasette.client.get(url.replace(".json", ""))
    assert database.suggestion_runs == suggestions
    assert suggested(html_again.text) == suggested(html.text)
    operator = await datasette.client.get(url, cookies=actor_cookies(datasette, "operator"))
    assert facet_counts(operator.json()) == counts
    assert database.facet_runs == 2 * runs  # the operator's policy reads rows its own way

    conn = sqlite3.connect(home / session["ledger"])
    try:
        conn.execute(
            "INSERT INTO model_items (model_call_id, timestamp, provider, model, path, trace_id,"
            " kind, item_index, call_id, content_hash) SELECT model_call_id, timestamp,"
            " 'a-new-provider', model, path, trace_id, kind, item_index + 1000, 'new-call',"
            " content_hash FROM model_items LIMIT 1"
        )
        conn.commit()
    finally:
        conn.close()
    changed = facet_counts((await datasette.client.get(url)).json())
    assert database.facet_runs == 3 * runs
    assert "a-new-provider" in changed["provider"]


def suggested(html: str) -> list[str]:
    """The facet suggestions a table page offers (their links)."""
    block = html.split('class="suggested-facets"', 1)[-1].split("</p>", 1)[0]
    return re.findall(r'href="([^"]*)"', block)


def without_duration(report: dict) -> dict:
    return {k: v for k, v in report.items() if k != "duration_ms"}


def facet_counts(data: dict) -> dict[str, dict]:
    results = data["facet_results"]
    results = results.get("results", results)  # Datasette 1.0 nests them
    return {
        name: {str(v["value"]): v["count"] for v in facet["results"]}
        for name, facet in results.items()
    }


def test_the_pages_row_verdicts_leave_out_the_whole_file_check_and_no_verdict(
    capsem_home, manifest, tmp_path
):
    """The `rows` profile (what trace, event and OTLP pages draw) does not run
    schema_not_ready (integrity_check or quick_check read every page of the file and judge no
    row), and its row verdicts are the full profile's, for every session with a defect."""
    sessions = {d["session"] for d in manifest["defects"]}
    compared = 0
    for session in readable(manifest):
        if session["id"] not in sessions or not session.get("ledger"):
            continue
        with ledger(capsem_home, session, tmp_path) as conn:
            rows = check_session(conn, profile=ROWS)
            full = check_session(conn, profile=FULL)
        skipped = [f for f in rows.findings if f.check == "schema_not_ready"]
        assert skipped and not any(f.applicable for f in skipped)
        assert rows.row_verdicts().rows() == full.row_verdicts().rows(), session["id"]
        compared += bool(full.row_verdicts().rows())
    assert compared >= 3


async def test_a_big_ledgers_trace_page_on_a_cold_store_answers_at_once_and_says_so(
    home, manifest, tmp_path, monkeypatch
):
    """A trace page whose rule book verdicts are neither held nor stored answers 202 'being
    computed' at once on a big ledger; the run goes on, and the page is then the page a small
    ledger gets straight away."""
    session = clean_current(manifest)[4]
    with sqlite3.connect(f"file:{home / session['ledger']}?immutable=1", uri=True) as conn:
        trace = conn.execute(
            "SELECT trace_id FROM model_calls WHERE trace_id IS NOT NULL ORDER BY id LIMIT 1"
        ).fetchone()[0]
    url = trace_url(session["id"], trace)
    datasette = await make_datasette(home, tmp_path / "cache", index_refresh_seconds=0)
    monkeypatch.setattr(ledger_db, "BIG_LEDGER_BYTES", 0)
    monkeypatch.setattr(pending_view, "WAIT_SECONDS", 0)
    first = await datasette.client.get(url)
    assert first.status_code == 202
    assert "Being computed" in first.text and 'http-equiv="refresh"' in first.text
    page = await past_202(datasette, url)
    assert page.status_code == 200
    monkeypatch.undo()
    other = await make_datasette(home, tmp_path / "other-cache", index_refresh_seconds=0)
    expected = await other.client.get(url)
    assert expected.status_code == 200
    assert strip_nonces(page.text) == strip_nonces(expected.text)


def strip_nonces(html: str) -> str:
    return re.sub(r'nonce="[^"]*"', "", html)


async def test_a_big_ledgers_first_overview_answers_at_once_and_says_so(
    home, manifest, tmp_path, monkeypatch
):
    """On a big ledger, the overview's first view per file version answers 202 while its
    summary is read, and its quick check says it is running until it is done; then the page
    is the one a small ledger gets straight away."""
    session = clean_current(manifest)[5]
    url = session_url(session["id"], ".json")
    datasette = await make_datasette(home, tmp_path / "cache", index_refresh_seconds=0)
    monkeypatch.setattr(ledger_db, "BIG_LEDGER_BYTES", 0)
    monkeypatch.setattr(pending_view, "WAIT_SECONDS", 0)
    first = await datasette.client.get(url)
    assert first.status_code == 202 and first.json()["checking"] is True
    # Another page of turns is another answer: not held either, whatever the run above did.
    page = await datasette.client.get(url.removesuffix(".json") + "?_size=7")
    assert page.status_code == 202 and "Being computed" in page.text
    for _ in range(1000):
        found = await datasette.client.get(url)
        if found.status_code == 200 and found.json()["integrity"]["available"]:
            break
        assert found.status_code == 202 or "being checked" in found.json()["integrity"]["message"]
        await asyncio.sleep(0.01)
    monkeypatch.undo()
    other = await make_datasette(home, tmp_path / "other-cache", index_refresh_seconds=0)
    expected = (await other.client.get(url)).json()
    got = found.json()
    for data in (got, expected):
        for key in ("computed_at", "age_seconds", "cached", "duration_ms"):
            data["integrity"].pop(key, None)
    assert got == expected


async def test_a_big_ledgers_unknown_trace_is_decided_after_the_202(
    home, manifest, tmp_path, monkeypatch
):
    """On a big ledger whose row verdicts and trace rows are not held, the trace page answers
    before it reads the trace's rows (a read that costs seconds on a file the OS no longer
    caches): so even a trace no row carries gets the 202 first, and its 404 on the reload.
    Once the verdicts are held, a trace not read yet still answers at once, saying its rows
    are being read."""
    session = clean_current(manifest)[6]
    with sqlite3.connect(f"file:{home / session['ledger']}?immutable=1", uri=True) as conn:
        traces = [
            row[0]
            for row in conn.execute(
                "SELECT trace_id FROM model_calls WHERE trace_id IS NOT NULL"
                " GROUP BY trace_id ORDER BY min(id) LIMIT 2"
            )
        ]
    assert len(traces) == 2
    datasette = await make_datasette(home, tmp_path / "cache", index_refresh_seconds=0)
    monkeypatch.setattr(ledger_db, "BIG_LEDGER_BYTES", 0)
    monkeypatch.setattr(pending_view, "WAIT_SECONDS", 0)
    unknown = trace_url(session["id"], "no-such-trace")
    first = await datasette.client.get(unknown)
    assert first.status_code == 202 and "Being computed" in first.text
    again = await past_202(datasette, unknown)
    assert again.status_code == 404 and "no-such-trace" in again.text

    url = trace_url(session["id"], traces[0])
    page = await past_202(datasette, url)
    assert page.status_code == 200
    later = await datasette.client.get(trace_url(session["id"], traces[1]))
    assert later.status_code == 202 and "rows are being read" in later.text


async def test_a_big_ledgers_facets_are_counted_in_the_background_and_the_page_says_so(
    home, manifest, tmp_path, monkeypatch
):
    """A table page of a big ledger whose facet counts are not known for this file version
    answers without counting them: the page lists them as being counted (not silently
    missing) while they are counted apart, and a later view shows the counts a small
    ledger's page shows at once. The rest of Datasette's page is there meanwhile."""
    session = clean_current(manifest)[8]
    assert not (home / (session["ledger"] + "-wal")).exists()  # kept per version: no writer
    path = f"/{session['id']}/model_items"
    query = "?" + "&".join(f"_facet={f}" for f in FACETS)
    datasette = await make_datasette(home, tmp_path / "cache", index_refresh_seconds=0)
    monkeypatch.setattr(ledger_db, "BIG_LEDGER_BYTES", 0)
    first = await datasette.client.get(path + query)
    assert first.status_code == 200, first.text[:300]
    assert "being counted in the background" in first.text
    assert "These facets timed out" not in first.text
    assert all(name in first.text.split("being counted")[1].split("</p>")[0] for name in FACETS)
    assert 'class="rows-and-columns"' in first.text and 'class="facet-info ' not in first.text
    json_url = path + ".json" + query + "&_extra=facet_results"
    for _ in range(1000):
        counted = await datasette.client.get(json_url)
        if len(facet_counts(counted.json())) == len(FACETS):
            break
        await asyncio.sleep(0.01)
    database = datasette.get_database(session["id"])
    assert database.facet_runs == len(FACETS)  # once each, in the background
    html = await datasette.client.get(path + query)
    assert "being counted" not in html.text
    assert all(f'id="facet-{name}"' in html.text for name in FACETS)
    monkeypatch.undo()
    small = await make_datasette(home, tmp_path / "small-cache", index_refresh_seconds=0)
    expected = await small.client.get(json_url)
    assert facet_counts(counted.json()) == facet_counts(expected.json())


async def test_a_big_ledgers_timeline_answers_at_once_then_is_kept(
    home, manifest, tmp_path, monkeypatch
):
    """A big ledger's timeline page (its count and order read every row) answers 202 while a
    page not held is read, then the page a small ledger gets straight away, from memory."""
    session = clean_current(manifest)[10]
    url = session_url(session["id"], "/timeline.json?_size=20")
    datasette = await make_datasette(home, tmp_path / "cache", index_refresh_seconds=0)
    monkeypatch.setattr(ledger_db, "BIG_LEDGER_BYTES", 0)
    monkeypatch.setattr(pending_view, "WAIT_SECONDS", 0)
    first = await datasette.client.get(url)
    assert first.status_code == 202 and first.json()["checking"] is True
    # Another page is another answer (the first may be done by now: not this one).
    html = await datasette.client.get(url.replace(".json?_size=20", "?_size=21"))
    assert html.status_code == 202 and "timeline is being read" in html.text
    found = await past_202(datasette, url)
    assert found.status_code == 200
    monkeypatch.undo()
    small = await make_datasette(home, tmp_path / "small-cache", index_refresh_seconds=0)
    expected = await small.client.get(url)
    assert found.json() == expected.json() and expected.json()["rows"]


def stored_profiles(datasette) -> list[str]:
    """The profiles of the answers in the instance's trace store (each file's header line)."""
    directory = Path(trace_store(datasette).directory)
    found = []
    for path in directory.glob("*") if directory.exists() else ():
        with path.open("rb") as stream:
            found.append(json.loads(stream.readline())["profile"])
    return found


async def test_a_big_ledgers_timeline_stores_only_the_whole_timelines_pages(
    home, manifest, tmp_path, monkeypatch
):
    """A time range, a trace id, a layer set, a page size or an offset of the reader's choosing
    is kept in memory only: a stored file each would let requests fill the disk until the
    ledger changes. The whole timeline's pages are stored, so a restart reads them back."""
    session = clean_current(manifest)[10]
    datasette = await make_datasette(home, tmp_path / "cache", index_refresh_seconds=0)
    monkeypatch.setattr(ledger_db, "BIG_LEDGER_BYTES", 0)
    monkeypatch.setattr(pending_view, "WAIT_SECONDS", 0)

    async def answered(query: str):
        return await past_202(datasette, session_url(session["id"], f"/timeline.json?{query}"))

    chosen = ("since=2020-01-01", "until=2999-01-01", "_size=21", "_next=7", "layer=net")
    for query in chosen:
        assert (await answered(query)).status_code == 200, query
    assert (await answered("_next=0")).status_code == 200
    for _ in range(1000):  # the store writes in the background
        timelines = [p for p in stored_profiles(datasette) if p.startswith("data|timeline|")]
        if timelines:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.2)  # any other answer's write has had its turn too
    timelines = [p for p in stored_profiles(datasette) if p.startswith("data|timeline|")]
    assert len(timelines) == 1 and "offset=0" in timelines[0], timelines


async def test_the_tail_masks_each_row_once_per_file_version_and_policy(
    home, manifest, tmp_path, monkeypatch
):
    """The tail page of a masked reader masks each held row once per file version and reader
    policy: a second view, its JSON and a filtered view mask none of the rows' texts again
    (the whole page's walk no longer re-masks them either); another policy makes its own."""
    session = clean_current(manifest)[0]
    datasette = await make_datasette(
        home, tmp_path / "cache", index_refresh_seconds=0, view_secrets={"id": "operator"}
    )
    masked: list[str] = []
    mask_text = redaction.mask_text

    def counting(text: str) -> str:
        masked.append(text)
        return mask_text(text)

    monkeypatch.setattr(redaction, "mask_text", counting)
    url = session_url(session["id"], "/tail")
    first = await datasette.client.get(url + ".json")
    assert first.status_code == 200, first.text[:300]
    rows = first.json()["rows"]
    texts = {str(v) for r in rows for v in r["fields"].values()} | {r["summary"] for r in rows}
    texts -= set(first.json()["all_kinds"])  # the page's own list of tables
    assert len(rows) > 10 and len(set(masked) & texts) > 10
    for again in (url + ".json", url, url + "?kind=" + rows[0]["kind"]):
        del masked[:]
        response = await datasette.client.get(again)
        assert response.status_code == 200
        assert not set(masked) & texts, (again, sorted(set(masked) & texts)[:5])
    assert (await datasette.client.get(url + ".json")).json()["rows"] == rows
    del masked[:]
    operator = await datasette.client.get(
        url + ".json", cookies=actor_cookies(datasette, "operator")
    )
    assert operator.status_code == 200 and not masked  # the operator's rows: its own, unmasked
    monkeypatch.undo()


async def test_the_tail_shows_its_newest_rows_and_says_when_more_are_held(home, manifest, tmp_path):
    """The tail page shows the newest `limit` rows (500 unless asked), and says in its page and
    its JSON that more are held, with the link that shows them all; a bad limit is a 400."""
    session = clean_current(manifest)[0]
    datasette = await make_datasette(home, tmp_path / "cache", index_refresh_seconds=0)
    url = session_url(session["id"], "/tail")
    whole = (await datasette.client.get(url + ".json")).json()
    assert whole["partial"] is False and whole["all_url"] is None
    assert whole["shown"] == whole["held"] == len(whole["rows"]) > 3
    some = (await datasette.client.get(url + ".json?limit=3")).json()
    assert some["partial"] is True and some["gap"] is True
    assert some["shown"] == 3 and some["held"] == whole["held"]
    assert some["rows"] == whole["rows"][:3]
    assert some["all_url"].endswith(f"/tail?limit={whole['held']}")
    page = await datasette.client.get(url + "?limit=3")
    assert page.status_code == 200
    assert f"Partial: showing the newest 3 of the {whole['held']:,} rows held" in page.text
    assert page.text.count('class="capsem-snippet"') == 3
    for bad in ("0", "-1", "x", "1e3", "\u00b2", "9" * 20):
        response = await datasette.client.get(url + ".json", params={"limit": bad})
        assert response.status_code == 400, bad
        assert "limit" in response.json()["message"]


def event_ids(ledger_path: Path) -> dict[str, str]:
    """An event id of each primary table that has one, read straight from the ledger."""
    conn = sqlite3.connect(f"file:{ledger_path}?immutable=1", uri=True)
    try:
        found = {}
        for table in ("model_calls", "tool_calls", "model_items", "net_events"):
            row = conn.execute(
                f"SELECT event_id FROM {table} WHERE event_id IS NOT NULL ORDER BY id DESC LIMIT 1"
            ).fetchone()
            if row:
                found[table] = row[0]
        return found
    finally:
        conn.close()


async def test_an_event_is_found_by_its_map_with_no_table_read_whole(home, manifest):
    """The tables without an index on event_id (Capsem's tool_calls and model_items) are read
    once into the event id map; with it, every statement of an event's rows searches by index
    or row id (EXPLAIN QUERY PLAN shows no SCAN of a ledger table), and the rows are those the
    plain statements find."""
    session = clean_current(manifest)[0]
    conn = sqlite3.connect(f"file:{home / session['ledger']}?immutable=1", uri=True)
    try:
        schema = read_schema(conn)
        assert set(events.unindexed_event_tables(conn, schema)) == {"tool_calls", "model_items"}
        locator = events.locate_events(conn, schema)
        for table, event_id in event_ids(home / session["ledger"]).items():
            statements: list[str] = []
            conn.set_trace_callback(statements.append)
            located = events.event_rows(conn, schema, event_id, locator)
            conn.set_trace_callback(None)
            assert [r["table"] for r in located] == [table]
            assert located == events.event_rows(conn, schema, event_id)
            for sql in statements:
                plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql)]
                assert not [p for p in plan if p.startswith("SCAN") and "json_each" not in p], (
                    sql,
                    plan,
                )
        assert events.event_rows(conn, schema, "ffffffffffff", locator) == []
    finally:
        conn.close()


async def test_the_event_map_keeps_odd_ids_duplicates_and_its_limit():
    locator = events.EventLocator()
    pairs = [("00000000000a", 7), ("00000000000a", 3), ("ABCDEF012345", 9), ("x'; --", 4)]
    pairs += [("000000000000", n) for n in range(100, 40, -1)]
    locator.add("tool_calls", pairs)
    assert locator.rowids("tool_calls", "00000000000a", 50) == [3, 7]
    assert locator.rowids("tool_calls", "ABCDEF012345", 50) == [9]
    assert locator.rowids("tool_calls", "abcdef012345", 50) == []
    assert locator.rowids("tool_calls", "x'; --", 50) == [4]
    assert locator.rowids("tool_calls", "000000000000", 5) == [41, 42, 43, 44, 45]
    assert locator.rowids("model_items", "00000000000a", 50) is None
    assert locator.rows == len(pairs)


async def test_a_big_ledgers_event_page_reads_its_event_map_once_and_says_so_meanwhile(
    home, manifest, tmp_path, monkeypatch
):
    """On a big ledger an event page answers 202 (a page that reloads itself) while the event
    id map is read, once per file version; then each event page is the page a small ledger
    gets, and a changed file is read again."""
    session = clean_current(manifest)[1]
    ids = event_ids(home / session["ledger"])
    urls = {t: session_url(session["id"], f"/events/{e}") for t, e in ids.items()}
    other = await make_datasette(home, tmp_path / "other-cache", index_refresh_seconds=0)
    expected = {t: (await other.client.get(u + ".json")).json() for t, u in urls.items()}
    datasette = await make_datasette(home, tmp_path / "cache", index_refresh_seconds=0)
    runs = counted_map_reads(monkeypatch, home / session["ledger"])
    monkeypatch.setattr(ledger_db, "BIG_LEDGER_BYTES", 0)
    monkeypatch.setattr(pending_view, "WAIT_SECONDS", 0)
    first = await datasette.client.get(urls["tool_calls"])
    assert first.status_code == 202
    assert "Being computed" in first.text and 'http-equiv="refresh"' in first.text
    assert "event ids are being read" in first.text
    for table, url in urls.items():
        page = await past_202(datasette, url + ".json")
        assert page.status_code == 200 and page.json() == expected[table], table
    assert len(runs) == 1
    # A changed file: its map is read again in the background, and meanwhile the last one
    # serves at once, finding the rows written since by their ids.
    conn = sqlite3.connect(home / session["ledger"])
    try:
        conn.execute(
            "INSERT INTO model_items (event_id, model_call_id, timestamp, provider, model, path,"
            " trace_id, kind, item_index, call_id, content_hash) SELECT 'abcdefabcdef',"
            " model_call_id, timestamp, provider, model, path, trace_id, kind,"
            " item_index + 1000, 'event-map-call', content_hash FROM model_items LIMIT 1"
        )
        conn.commit()
    finally:
        conn.close()
    added = await datasette.client.get(session_url(session["id"], "/events/abcdefabcdef.json"))
    assert added.status_code == 200
    assert [r["table"] for r in added.json()["rows"]] == ["model_items"]
    await map_reads_reach(runs, 2)
    assert len(runs) == 2
    monkeypatch.undo()


async def test_a_big_ledgers_table_count_is_made_in_the_background_once_per_file_version(
    home, manifest, tmp_path, monkeypatch
):
    """A table page's count of its rows is kept per file version: on a big ledger it is not
    made in the request (the whole of an index from a cold disk: seconds) but apart, the page
    saying so meanwhile; later views run no count, and a changed file is counted again."""
    session = clean_current(manifest)[6]
    path = f"/{session['id']}/fs_events"
    datasette = await make_datasette(home, tmp_path / "cache", index_refresh_seconds=0)
    monkeypatch.setattr(ledger_db, "BIG_LEDGER_BYTES", 0)
    first = await datasette.client.get(path + "?_nosuggest=1")
    assert first.status_code == 200, first.text[:300]
    # Datasette 0.65 counts every row; 1.0 counts up to its count limit (a bounded read,
    # kept per file version all the same, made in the request).
    if datasette_version.startswith("0."):
        assert "number of this table's rows is being read in the background" in first.text
    database = datasette.get_database(session["id"])
    with sqlite3.connect(f"file:{home / session['ledger']}?immutable=1", uri=True) as conn:
        total = conn.execute("SELECT count(*) FROM fs_events").fetchone()[0]
    for _ in range(1000):
        page = await datasette.client.get(path + "?_nosuggest=1")
        if "capsem-rows-counting" not in page.text:
            break
        await asyncio.sleep(0.01)
    assert f"{total:,} row" in page.text
    runs = database.row_count_runs
    assert runs >= 1
    again = await datasette.client.get(path + "?_nosuggest=1")
    assert f"{total:,} row" in again.text and database.row_count_runs == runs
    add_file_event(home / session["ledger"], "/tmp/table-count-changed")
    for _ in range(1000):
        page = await datasette.client.get(path + "?_nosuggest=1")
        if f"{total + 1:,} row" in page.text:
            break
        await asyncio.sleep(0.01)
    assert f"{total + 1:,} row" in page.text  # counted again (kept, or as a live file's)
    monkeypatch.undo()


async def test_a_traces_event_id_uses_come_from_the_event_map(home, manifest):
    """A trace read with a big ledger's event id map counts the uses of its event ids in the
    tables without an index on event_id from the map (no statement reads them whole), and
    finds what the statements find; an earlier version's map is not used for that."""
    session = clean_current(manifest)[2]
    conn = sqlite3.connect(f"file:{home / session['ledger']}?immutable=1", uri=True)
    try:
        schema = read_schema(conn)
        trace = conn.execute(
            "SELECT trace_id FROM model_calls WHERE trace_id IS NOT NULL ORDER BY id LIMIT 1"
        ).fetchone()[0]
        locator = events.locate_events(conn, schema)
        statements: list[str] = []
        conn.set_trace_callback(statements.append)
        mapped = trace_rows.load_trace(conn, schema, trace, locator)
        conn.set_trace_callback(None)
        plain = trace_rows.load_trace(conn, schema, trace)
        assert mapped.event_id_uses == plain.event_id_uses and plain.event_id_uses
        counted = [s for s in statements if "count(*) AS uses" in s]
        assert counted and not any(t in s for s in counted for t in locator.tables)
        locator.current = False
        assert locator.uses_of("tool_calls", list(plain.event_id_uses)) is None
    finally:
        conn.close()


# A trace's rows through a big ledger's map (issue 29: a trace not viewed before read whole
# tables, 0.6 to 2.6 s from a cold disk): model_items has no index on model_call_id, the
# security tables and substitution_events none on trace_id.
LEDGER_TABLES_SCANNED = re.compile(r"^SCAN (?!json_each)")


def traces_of(conn: sqlite3.Connection, limit: int = 25) -> list[str]:
    """Trace ids of a ledger: its model calls' and its security rows' (some only there)."""
    found = []
    for table in ("model_calls", "tool_calls", "security_rule_events", "fs_events"):
        if not conn.execute(
            "SELECT 1 FROM pragma_table_info(?) WHERE name = 'trace_id'", (table,)
        ).fetchone():
            continue
        sql = f"SELECT DISTINCT trace_id FROM {table} WHERE trace_id IS NOT NULL LIMIT ?"
        found += [row[0] for row in conn.execute(sql, (limit,))]
    return list(dict.fromkeys(found))[:limit]


def immutable(path: Path) -> sqlite3.Connection:
    """A ledger opened as the plugin reads it (bad UTF-8 replaced, not an error)."""
    conn = sqlite3.connect(f"file:{path}?immutable=1", uri=True)
    conn.text_factory = lambda data: data.decode("utf-8", "replace")
    return conn


def scans(conn: sqlite3.Connection, statements: list[str]) -> list[tuple[str, str]]:
    found = []
    for sql in statements:
        for row in conn.execute("EXPLAIN QUERY PLAN " + sql):
            if LEDGER_TABLES_SCANNED.match(row[3]):
                found.append((row[3], sql[:120]))
    return found


async def test_the_map_holds_every_trace_lookup_no_index_starts_with(manifest, capsem_home):
    session = clean_current(manifest)[0]
    conn = immutable(capsem_home / session["ledger"])
    try:
        schema = read_schema(conn)
        assert events.unindexed_lookups(conn, schema) == {
            "tool_calls": ["event_id"],
            "model_items": ["event_id", "model_call_id"],
            "substitution_events": ["trace_id"],
            "security_rule_events": ["trace_id"],
            "security_decision_events": ["trace_id"],
            "security_ask_events": ["trace_id"],
        }
        locator = events.locate_events(conn, schema)
        items = conn.execute("SELECT count(*) FROM model_items").fetchone()[0]
        assert locator.mapped("model_items", "model_call_id") == items
        tagged = conn.execute(
            "SELECT count(*) FROM security_rule_events WHERE trace_id IS NOT NULL"
        ).fetchone()[0]
        assert locator.mapped("security_rule_events", "trace_id") == tagged
    finally:
        conn.close()


async def test_a_trace_read_with_the_map_reads_no_table_whole(manifest, capsem_home, monkeypatch):
    """With the map, every statement of a trace's rows searches an index or row ids: EXPLAIN
    QUERY PLAN shows no SCAN of a ledger table (the old statements scanned model_items, the
    security tables, substitution_events, and tool_calls and model_items for event id uses).
    Without it, the statements are those of a small ledger (they do scan)."""
    monkeypatch.setattr(trace_rows, "SCAN_SHARE", 0)  # the map however many rows a trace has
    for session in clean_current(manifest)[:3]:
        conn = immutable(capsem_home / session["ledger"])
        try:
            schema = read_schema(conn)
            locator = events.locate_events(conn, schema)
            for trace in traces_of(conn, 6):
                statements: list[str] = []
                conn.set_trace_callback(statements.append)
                mapped = trace_rows.load_trace(conn, schema, trace, locator)
                conn.set_trace_callback(None)
                assert not scans(conn, statements), (session["id"], trace)
                plain_statements: list[str] = []
                conn.set_trace_callback(plain_statements.append)
                plain = trace_rows.load_trace(conn, schema, trace)
                conn.set_trace_callback(None)
                assert mapped == plain
                assert scans(conn, plain_statements)
        finally:
            conn.close()


@pytest.mark.parametrize("share", [0, 8])
async def test_every_trace_read_with_the_map_is_the_trace_read_plainly(
    manifest, capsem_home, monkeypatch, share
):
    """Every readable ledger of the generated home (every era, defects injected): each trace
    read with its map (split lookups, `SCAN_SHARE` 0; or the table read whole past a share of
    its rows, 8) is the trace the plain statements read, field for field."""
    monkeypatch.setattr(trace_rows, "SCAN_SHARE", share)
    compared = 0
    for session in readable(manifest):
        conn = immutable(capsem_home / session["ledger"])
        try:
            try:
                schema = read_schema(conn)
            except sqlite3.DatabaseError:  # not a database (a session whose file is not)
                continue
            locator = events.locate_events(conn, schema)
            for trace in traces_of(conn, 8):
                mapped = trace_rows.load_trace(conn, schema, trace, locator)
                assert mapped == trace_rows.load_trace(conn, schema, trace), (session["id"], trace)
                compared += 1
        finally:
            conn.close()
    assert compared > 50


async def test_rows_found_only_by_the_map_and_a_shared_hash_are_the_plain_rows(
    manifest, capsem_home, tmp_path, monkeypatch
):
    """An item of one of the trace's model calls tagged with no trace id (found by its model
    call id alone), a security row tagged with the trace and no event of it (by its trace id
    alone), and every trace id given the same key in the map (a hash shared by all: the rows
    found are checked again in SQL): the rows of the plain statements, no more."""
    session = clean_current(manifest)[3]
    path = tmp_path / "session.db"
    shutil.copy(capsem_home / session["ledger"], path)
    conn = sqlite3.connect(path)
    conn.text_factory = lambda data: data.decode("utf-8", "replace")
    try:
        trace, call = conn.execute(
            "SELECT trace_id, id FROM model_calls WHERE trace_id IS NOT NULL ORDER BY id LIMIT 1"
        ).fetchone()
        conn.execute(
            "INSERT INTO model_items (event_id, model_call_id, timestamp, provider, model, path,"
            " trace_id, kind, item_index, call_id, content_hash) SELECT 'abcdef000001',"
            " model_call_id, timestamp, provider, model, path, NULL, kind, item_index + 1000,"
            " 'untagged-item', content_hash FROM model_items WHERE model_call_id = ? LIMIT 1",
            (call,),
        )
        conn.execute(
            "INSERT INTO security_rule_events (timestamp_unix_ms, event_id, event_type, rule_id,"
            " rule_action, rule_json, event_json, trace_id) VALUES (1, 'abcdef000002',"
            " 'dns.query', 'r', 'allow', '{}', '{}', ?)",
            (trace,),
        )
        conn.commit()
        schema = read_schema(conn)
        monkeypatch.setattr(trace_rows, "SCAN_SHARE", 0)
        locator = events.locate_events(conn, schema)
        plain = trace_rows.load_trace(conn, schema, trace)
        assert "untagged-item" in {r["call_id"] for r in plain.model_items}
        assert "abcdef000002" in {r["event_id"] for r in plain.security["security_rule_events"]}
        assert trace_rows.load_trace(conn, schema, trace, locator) == plain
        monkeypatch.setitem(events._KEYS, "trace_id", lambda value: 7 if value else None)
        shared = events.locate_events(conn, schema)
        assert len(shared.rowids_of("security_rule_events", "trace_id", [trace])) > len(
            plain.security["security_rule_events"]
        )
        assert trace_rows.load_trace(conn, schema, trace, shared) == plain
        shared.current = False  # an earlier version's map is not used for the rows
        statements: list[str] = []
        conn.set_trace_callback(statements.append)
        assert trace_rows.load_trace(conn, schema, trace, shared) == plain
        conn.set_trace_callback(None)
        assert not any("json_each(:ids)" in s for s in statements)
    finally:
        conn.close()


async def test_a_big_ledgers_trace_json_reads_the_map_once_and_answers_202_meanwhile(
    home, manifest, tmp_path, monkeypatch
):
    """On a big ledger a trace's conversation.json and tree.json answer 202 ("checking", with
    the seconds to ask again after) while its rows are read; the map is read once for every
    trace of the file version, each trace is read with it, and the answers are those of a
    server that reads the file as a small ledger."""
    session = clean_current(manifest)[4]
    conn = sqlite3.connect(f"file:{home / session['ledger']}?immutable=1", uri=True)
    try:
        traces = [t for t in traces_of(conn, 4)]
    finally:
        conn.close()
    other = await make_datasette(home, tmp_path / "other-cache", index_refresh_seconds=0)
    suffixes = ("/conversation.json", "/tree.json")
    expected = {}
    for trace in traces:
        for suffix in suffixes:
            response = await other.client.get(trace_url(session["id"], trace, suffix))
            expected[trace, suffix] = (response.status_code, response.json())
    datasette = await make_datasette(home, tmp_path / "cache", index_refresh_seconds=0)
    runs = counted_map_reads(monkeypatch, home / session["ledger"])
    located: list[bool] = []
    load = trace_view.load_trace

    def loading(conn, schema, trace_id, locator=None):
        located.append(locator is not None)
        return load(conn, schema, trace_id, locator)

    monkeypatch.setattr(trace_view, "load_trace", loading)
    monkeypatch.setattr(ledger_db, "BIG_LEDGER_BYTES", 0)
    monkeypatch.setattr(pending_view, "WAIT_SECONDS", 0)
    first = await datasette.client.get(trace_url(session["id"], traces[0], suffixes[0]))
    assert first.status_code == 202
    assert first.json()["checking"] is True and first.json()["reload_seconds"] == 2
    for trace in traces:
        for suffix in suffixes:
            page = await past_202(datasette, trace_url(session["id"], trace, suffix))
            assert (page.status_code, page.json()) == expected[trace, suffix], (trace, suffix)
    assert len(runs) == 1
    assert located and all(located)
    monkeypatch.undo()


async def test_a_changed_big_ledgers_trace_is_read_as_it_is_now_and_its_map_again(
    home, manifest, tmp_path, monkeypatch
):
    """After the file changes (an item added to one of the trace's model calls with no trace
    id: found only by its model call id), the trace's JSON is read without the last map (an
    earlier version's), finds the new row, and the map of the changed file is read again."""
    session = clean_current(manifest)[9]
    path = home / session["ledger"]
    with sqlite3.connect(f"file:{path}?immutable=1", uri=True) as conn:
        trace, call = conn.execute(
            "SELECT trace_id, id FROM model_calls WHERE trace_id IS NOT NULL ORDER BY id LIMIT 1"
        ).fetchone()
    url = trace_url(session["id"], trace, "/conversation.json")
    datasette = await make_datasette(home, tmp_path / "cache", index_refresh_seconds=0)
    runs = counted_map_reads(monkeypatch, home / session["ledger"])
    monkeypatch.setattr(ledger_db, "BIG_LEDGER_BYTES", 0)
    assert (await past_202(datasette, url)).status_code == 200
    assert len(runs) == 1
    conn = sqlite3.connect(path)
    try:
        conn.execute(
            "INSERT INTO model_items (event_id, model_call_id, timestamp, provider, model, path,"
            " trace_id, kind, item_index, call_id, content_hash) SELECT 'abcdef000003',"
            " model_call_id, timestamp, provider, model, path, NULL, kind, item_index + 1000,"
            " 'changed-item', content_hash FROM model_items WHERE model_call_id = ? LIMIT 1",
            (call,),
        )
        conn.commit()
    finally:
        conn.close()
    tree = await past_202(datasette, trace_url(session["id"], trace, ".json"))
    assert tree.status_code == 200
    with sqlite3.connect(f"file:{path}?immutable=1", uri=True) as conn:
        items = conn.execute(
            "SELECT count(*) FROM model_items WHERE trace_id = ? OR model_call_id IN"
            " (SELECT id FROM model_calls WHERE trace_id = ?)",
            (trace, trace),
        ).fetchone()[0]
    assert tree.json()["trace"]["rows"]["model_items"] == items
    await map_reads_reach(runs, 2)
    assert len(runs) == 2
    monkeypatch.undo()
    other = await make_datasette(home, tmp_path / "other-cache", index_refresh_seconds=0)
    expected = await other.client.get(trace_url(session["id"], trace, ".json"))
    assert tree.json()["trace"] == expected.json()["trace"]
