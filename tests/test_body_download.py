"""Bodies larger than the page cap (256 KiB) download in full: streamed, the stored bytes for
a reader with capsem-view-secrets, the masked bytes for everyone else (refused when the
instance hides free text whole), with the size stated on the page and in the panel's data."""

from __future__ import annotations

import shutil
import sqlite3

import httpx
import pytest
import pytest_asyncio
from blake3 import blake3

from datasette_capsem import redaction
from datasette_capsem.graph.bodies import DISPLAY_BYTES
from tests.browser import live_server
from tests.helpers import actor_cookies, make_datasette
from tests.trace_support import clean_current, event_url, trace_url

pytestmark = pytest.mark.asyncio(loop_scope="session")
SECRET = "sk-ant-api03-PLANTEDSECRET0123456789abcdef"


def big_body() -> bytes:
    """About 600 KiB of SSE with a credential at the start, one across the 256 KiB mark (a
    slice boundary of the stream), one near the end, and non-ASCII text."""
    line = 'data: {"type":"content_block_delta","delta":{"type":"text_delta","text":"é ok"}}\n\n'
    filler = line * (DISPLAY_BYTES // len(line))
    head = f'data: {{"authorization": "Bearer {SECRET}"}}\n\n'
    body = head + filler[: DISPLAY_BYTES - len(head) - 30]
    body += f"x-api-key: {SECRET}\n\n" + filler + f"token {SECRET}\n\n"
    return body.encode()


@pytest.fixture(scope="module")
def big_home(capsem_home, manifest, tmp_path_factory):
    home = tmp_path_factory.mktemp("download") / "home"
    shutil.copytree(capsem_home, home, symlinks=True)
    session = clean_current(manifest)[0]
    data = big_body()
    conn = sqlite3.connect(home / session["ledger"])
    try:
        blob_id, event_id, trace = conn.execute(
            "SELECT b.id, b.event_id, m.trace_id FROM event_body_blobs b JOIN model_calls m "
            "ON m.event_id = b.event_id WHERE b.direction = 'response' "
            "AND b.source_table = 'model_calls' ORDER BY b.id LIMIT 1"
        ).fetchone()
        conn.execute(
            "UPDATE event_body_blobs SET body = ?, original_bytes = ?, stored_bytes = ?, "
            "truncated = 0, content_type = 'text/event-stream', body_hash = ? WHERE id = ?",
            (data, len(data), len(data), "blake3:" + blake3(data).hexdigest(), blob_id),
        )
        conn.commit()
    finally:
        conn.close()
    return home, session, event_id, blob_id, trace, data


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def datasette(big_home, tmp_path_factory):
    return await make_datasette(
        big_home[0],
        tmp_path_factory.mktemp("download-cache"),
        index_refresh_seconds=0,
        view_secrets={"id": "operator"},
    )


def download_url(session_id: str, event_id: str, blob_id: int) -> str:
    return event_url(session_id, event_id, f"/bodies/{blob_id}/download")


async def test_a_reader_without_view_secrets_gets_the_whole_body_masked(datasette, big_home):
    _, session, event_id, blob_id, _, data = big_home
    response = await datasette.client.get(download_url(session["id"], event_id, blob_id))
    assert response.status_code == 200
    assert response.headers["x-capsem-masked"] == "1"
    assert response.headers["content-type"] == "application/octet-stream"
    assert "attachment" in response.headers["content-disposition"]
    assert response.headers["x-capsem-stored-bytes"] == str(len(data))
    body = response.content
    assert b"PLANTEDSECRET" not in body
    assert body.count(b"[redacted:") == 3
    assert body == redaction.mask_bytes(data, force=True)  # the whole body, not the page's cut
    # A stream: every delta event of the whole body is there, its fragment hidden, and the
    # text they assemble to follows, UTF-8 kept byte for byte.
    fragment = redaction.STREAMED_FRAGMENT.encode()
    assert body.count(fragment) == data.count(b'"text_delta"') > DISPLAY_BYTES * 2 // 90
    assert body.count("é ok".encode()) == data.count("é ok".encode())
    assert int(response.headers["content-length"]) == len(body)


async def test_an_operator_gets_the_stored_bytes_streamed(datasette, big_home, tmp_path):
    home, session, event_id, blob_id, _, data = big_home
    path = download_url(session["id"], event_id, blob_id)
    with live_server(
        home, tmp_path / "cache", view_secrets={"id": "operator"}, trusted_actor_header="x-actor"
    ) as base:
        operator = {"x-actor": "operator"}
        with httpx.stream("GET", base + path, headers=operator, timeout=30) as response:
            assert response.status_code == 200
            assert response.headers["x-capsem-masked"] == "0"
            assert int(response.headers["content-length"]) == len(data)
            received = b"".join(response.iter_raw())
        assert received == data
        assert "blake3:" + blake3(received).hexdigest() == "blake3:" + blake3(data).hexdigest()
        anonymous = httpx.get(base + path, timeout=30)
        assert anonymous.headers["x-capsem-masked"] == "1"
        assert SECRET.encode() not in anonymous.content


async def test_the_pages_state_the_size_and_link_the_download(datasette, big_home):
    _, session, event_id, blob_id, trace, data = big_home
    page = await datasette.client.get(event_url(session["id"], event_id, f"/bodies/{blob_id}"))
    assert page.status_code == 200
    assert "Download the full body" in page.text
    assert f"{len(data):,} bytes stored" in page.text
    assert f"this page shows the first {DISPLAY_BYTES:,} bytes" in page.text
    assert f"Showing the first {DISPLAY_BYTES:,} of {len(data):,} bytes" in page.text
    assert "PLANTEDSECRET" not in page.text
    as_json = (
        await datasette.client.get(event_url(session["id"], event_id, f"/bodies/{blob_id}.json"))
    ).json()
    assert as_json["download"].endswith(f"/bodies/{blob_id}/download")
    assert as_json["download_masked"] is True
    assert as_json["view"]["display_truncated"] is True
    node = (
        await datasette.client.get(
            trace_url(session["id"], trace, "/node.json") + "?id=event_body_blobs:" + str(blob_id)
        )
    ).json()
    assert node["bodies"][0]["download"] == as_json["download"]
    operator = (
        await datasette.client.get(
            event_url(session["id"], event_id, f"/bodies/{blob_id}.json"),
            cookies=actor_cookies(datasette, "operator"),
        )
    ).json()
    assert operator["download_masked"] is False


async def test_hidden_free_text_refuses_the_download(big_home, tmp_path):
    home, session, event_id, blob_id, _, _ = big_home
    strict = await make_datasette(home, tmp_path / "cache", hide_free_text=True)
    response = await strict.client.get(download_url(session["id"], event_id, blob_id))
    assert response.status_code == 403
    assert b"PLANTEDSECRET" not in response.content


async def test_a_body_of_another_event_is_a_404(datasette, big_home):
    _, session, event_id, blob_id, _, _ = big_home
    wrong = await datasette.client.get(download_url(session["id"], "000000000000", blob_id))
    assert wrong.status_code == 404
    missing = await datasette.client.get(download_url(session["id"], event_id, 99999999))
    assert missing.status_code == 404
