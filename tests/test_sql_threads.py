"""Where a ledger's queries run: Datasette's own queries of a page on a small ledger in the
event loop's thread (a handoff to a SQL thread costs more than such a query), a request's own
SQL and every query of a big or slow file in the SQL threads, and never a wait on the loop
for a connection another thread holds (mount/ledger_db.py, core_pages/lazy_mount.py)."""

from __future__ import annotations

import asyncio
import threading
from urllib.parse import quote

import pytest
import pytest_asyncio

from datasette_capsem.mount import ledger_db
from datasette_capsem.mount.ledger_db import LedgerDatabase
from datasette_capsem.state import get_state
from tests.helpers import make_datasette, session_in

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest.fixture
def ran(monkeypatch) -> list[tuple[bool, str, str]]:
    """(in the event loop's thread?, database, module of the query's function) of every query
    of a Capsem file; the tests' loop runs in the main thread."""
    calls: list[tuple[bool, str, str]] = []
    original_inline, original_run = LedgerDatabase._run_inline, LedgerDatabase._run

    def record(self, fn) -> None:
        in_loop = threading.current_thread() is threading.main_thread()
        calls.append((in_loop, self.name, getattr(fn, "__module__", "")))

    def inline(self, fn):
        result = original_inline(self, fn)
        if result[0]:
            record(self, fn)
        return result

    def threaded(self, fn):
        record(self, fn)
        return original_run(self, fn)

    monkeypatch.setattr(LedgerDatabase, "_run_inline", inline)
    monkeypatch.setattr(LedgerDatabase, "_run", threaded)
    return calls


def of(ran: list[tuple[bool, str, str]], database: str) -> list[bool]:
    """Where Datasette's own queries of `database` ran (True: in the loop's thread)."""
    return [
        in_loop
        for in_loop, name, module in ran
        if name == database and module.startswith("datasette.")
    ]


def small_session(manifest: dict) -> dict:
    return session_in(
        manifest,
        era="head",
        has=("ledger", "clean"),
        lacks=("live",),
        where=lambda s: s.get("counts", {}).get("model_calls"),
    )


@pytest_asyncio.fixture(loop_scope="session")
async def instance(capsem_home, cache_dir):
    return await make_datasette(capsem_home, cache_dir)


async def test_a_table_page_on_a_small_ledger_queries_in_the_loop_thread(instance, manifest, ran):
    session = small_session(manifest)
    page = await instance.client.get(f"/{session['id']}/model_calls")
    assert page.status_code == 200
    assert f'href="/-/capsem/sessions/{session["id"]}' in page.text  # ids still links
    queries = of(ran, session["id"])
    assert len(queries) > 20  # the page's own queries, facet suggestions included
    assert all(queries)
    rows = await instance.client.get(f"/{session['id']}/model_calls.json?_shape=array&_size=max")
    assert len(rows.json()) == session["counts"]["model_calls"]


@pytest.mark.parametrize(
    "query",
    [
        "sql=" + quote("select count(*) from model_calls"),
        "%73ql=" + quote("select count(*) from model_calls"),  # `sql`, percent-encoded
    ],
)
async def test_sql_of_the_request_runs_in_a_sql_thread(instance, manifest, ran, query):
    session = small_session(manifest)
    # 1.0 redirects /<db>.json?sql= to /<db>/-/query.json: followed, as a client does; rows
    # as arrays on both lines (1.0's default is objects)
    url = f"/{session['id']}.json?{query}&_shape=arrays"
    response = await instance.client.get(url, follow_redirects=True)
    assert response.status_code == 200
    assert response.json()["rows"] == [[session["counts"]["model_calls"]]]
    assert ran and not any(in_loop for in_loop, _, _ in ran)


async def test_a_where_clause_runs_in_a_sql_thread(instance, manifest, ran):
    session = small_session(manifest)
    where = quote("id > 0")
    response = await instance.client.get(f"/{session['id']}/model_calls.json?_where={where}")
    assert response.status_code == 200
    assert ran and not any(in_loop for in_loop, _, _ in ran)


async def test_a_big_file_queries_in_sql_threads(instance, manifest, ran, monkeypatch):
    monkeypatch.setattr(ledger_db, "INLINE_MAX_BYTES", 0)
    session = small_session(manifest)
    assert (await instance.client.get(f"/{session['id']}/model_calls")).status_code == 200
    assert ran and not any(in_loop for in_loop, _, _ in ran)


async def test_a_slow_query_sends_the_file_back_to_sql_threads(
    instance, manifest, ran, monkeypatch
):
    monkeypatch.setattr(ledger_db, "INLINE_SLOW_SECONDS", -1.0)  # every query counts as slow
    session = small_session(manifest)
    assert (await instance.client.get(f"/{session['id']}/model_calls")).status_code == 200
    queries = of(ran, session["id"])
    strikes = ledger_db.INLINE_SLOW_STRIKES
    assert (
        len(queries) > 20 and queries[:strikes] == [True] * strikes and not any(queries[strikes:])
    )


async def test_the_loop_never_waits_for_a_connection_a_thread_holds(instance, manifest):
    """A SQL thread still on the connection (a cancelled request's query): the page's queries
    queue for it in the SQL threads; the loop keeps serving. If the loop waited, the release
    below could never be signalled and the holder's deadline (a hang bound) would pass."""
    session = small_session(manifest)
    url = f"/{session['id']}/model_calls.json"
    assert (await instance.client.get(url)).status_code == 200  # mounted
    database = get_state(instance).mounter.mounted[session["id"]]
    holding, release, timed_out = threading.Event(), threading.Event(), []

    def hold():
        with database._use:
            holding.set()
            if not release.wait(60):
                timed_out.append(True)

    holder = threading.Thread(target=hold)
    holder.start()
    holding.wait(60)
    request = asyncio.ensure_future(instance.client.get(url))
    for _ in range(6000):  # the loop runs on while the request waits in a SQL thread
        if database._queue is not None and database._queue.locked():
            break
        await asyncio.sleep(0.01)
    assert database._queue.locked() and not request.done()
    release.set()
    response = await asyncio.wait_for(request, 60)
    holder.join(60)
    assert response.status_code == 200 and not timed_out
