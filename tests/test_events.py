"""The event page: the row an event id names, its security rows, and its bodies decoded by
content type, with sizes and the blake3 check; large bodies load on request."""

from __future__ import annotations

import json

import blake3
import pytest

from datasette_capsem.graph import bodies, events
from tests.trace_support import (
    clean_current,
    defect_sessions,
    event_url,
    hostile_session,
    ledger,
    of_era,
)

pytestmark = pytest.mark.asyncio(loop_scope="session")


def blob_event(conn, blob_id: int) -> str:
    return conn.execute("SELECT event_id FROM event_body_blobs WHERE id = ?", [blob_id]).fetchone()[
        0
    ]


async def test_a_model_call_event(datasette, manifest, capsem_home, cache_dir):
    session = clean_current(manifest)[0]
    with ledger(capsem_home, session, cache_dir) as conn:
        call = conn.execute("SELECT id, event_id FROM model_calls ORDER BY id LIMIT 1").fetchone()
        rules = conn.execute(
            "SELECT count(*) FROM security_rule_events WHERE event_id = ?", [call["event_id"]]
        ).fetchone()[0]
        blobs = conn.execute(
            "SELECT id, body, body_hash FROM event_body_blobs WHERE event_id = ?",
            [call["event_id"]],
        ).fetchall()
    data = (await datasette.client.get(event_url(session["id"], call["event_id"], ".json"))).json()
    assert [(r["table"], r["row_id"]) for r in data["rows"]] == [("model_calls", call["id"])]
    assert data["rows"][0]["href"] == f"/{session['id']}/model_calls/{call['id']}"
    rule_rows = [s for s in data["security"] if s["table"] == "security_rule_events"]
    assert len(rule_rows) == rules >= 1
    pretty = rule_rows[0]["json"]["rule_json"]
    assert "\n  " in pretty and json.loads(pretty)
    assert {b["id"] for b in data["bodies"]} == {b["id"] for b in blobs}
    for body in data["bodies"]:
        assert body["hash_verdict"] == "verified" and body["size_ok"] is True
        assert not body["deferred"]
        assert body["view"]["kind"] == "json"
        assert (
            body["body_hash"]
            == "blake3:"
            + blake3.blake3(next(b["body"] for b in blobs if b["id"] == body["id"])).hexdigest()
        )
    html = (await datasette.client.get(event_url(session["id"], call["event_id"]))).text
    assert "blake3 matches" in html and "rule_json" in html


async def test_a_blob_whose_hash_does_not_match(datasette, manifest, capsem_home, cache_dir):
    session, defect = defect_sessions(manifest, "blob_hash_mismatch")[0]
    with ledger(capsem_home, session, cache_dir) as conn:
        event_id = blob_event(conn, defect["row_id"])
    data = (await datasette.client.get(event_url(session["id"], event_id, ".json"))).json()
    body = next(b for b in data["bodies"] if b["id"] == defect["row_id"])
    assert body["hash_verdict"] == "mismatch"
    html = (await datasette.client.get(event_url(session["id"], event_id))).text
    assert "blake3 does not match the stored bytes" in html
    alone = await datasette.client.get(
        event_url(session["id"], event_id, f"/bodies/{defect['row_id']}.json")
    )
    assert alone.json()["hash_verdict"] == "mismatch"


async def test_a_blob_whose_sizes_disagree(datasette, manifest, capsem_home, cache_dir):
    session, defect = defect_sessions(manifest, "blob_size_mismatch")[0]
    with ledger(capsem_home, session, cache_dir) as conn:
        event_id = blob_event(conn, defect["row_id"])
    data = (await datasette.client.get(event_url(session["id"], event_id, ".json"))).json()
    body = next(b for b in data["bodies"] if b["id"] == defect["row_id"])
    assert body["size_ok"] is False


async def test_a_huge_body_loads_lazily_and_is_cut_for_display(
    datasette, manifest, capsem_home, cache_dir
):
    session = hostile_session(manifest)
    huge = next(
        h
        for h in manifest["hostile"]
        if h["session"] == session["id"] and h["table"] == "event_body_blobs"
    )
    with ledger(capsem_home, session, cache_dir) as conn:
        event_id = blob_event(conn, huge["row_id"])
    data = (await datasette.client.get(event_url(session["id"], event_id, ".json"))).json()
    deferred = next(b for b in data["bodies"] if b["id"] == huge["row_id"])
    assert deferred["deferred"] is True and "view" not in deferred
    html = (await datasette.client.get(event_url(session["id"], event_id))).text
    assert f'data-body-url="{deferred["href"]}"' in html
    loaded = (await datasette.client.get(deferred["href"])).json()
    assert loaded["stored_bytes"] > bodies.DISPLAY_BYTES
    assert loaded["view"]["display_truncated"] is True
    assert loaded["view"]["display_bytes"] == bodies.DISPLAY_BYTES
    assert loaded["hash_verdict"] == ("unverifiable" if loaded["truncated"] else "verified")
    page = (await datasette.client.get(deferred["page"])).text
    assert "<script>window.__pwned" not in page and "&lt;script&gt;" in page


async def test_binary_and_html_cells_are_shown_safely(datasette, manifest, capsem_home, cache_dir):
    session = hostile_session(manifest)
    binary = next(
        h
        for h in manifest["hostile"]
        if h["session"] == session["id"]
        and h["kind"] == "binary_value"
        and h["table"] == "tool_calls"
    )
    with ledger(capsem_home, session, cache_dir) as conn:
        event_id = conn.execute(
            "SELECT event_id FROM tool_calls WHERE id = ?", [binary["row_id"]]
        ).fetchone()[0]
    data = (await datasette.client.get(event_url(session["id"], event_id, ".json"))).json()
    row = next(r for r in data["rows"] if r["table"] == "tool_calls")
    assert row["cells"][binary["column"]].startswith("0x")
    assert binary["column"] in row["cut"]
    html = (await datasette.client.get(event_url(session["id"], event_id))).text
    assert "full value" in html and "<script>window.__pwned" not in html


async def test_raw_bodies_need_the_secrets_permission(
    datasette, operator_datasette, manifest, capsem_home, cache_dir
):
    session = clean_current(manifest)[0]
    with ledger(capsem_home, session, cache_dir) as conn:
        blob = conn.execute("SELECT id, event_id, body FROM event_body_blobs LIMIT 1").fetchone()
    url = event_url(session["id"], blob["event_id"], f"/bodies/{blob['id']}/raw")
    assert (await datasette.client.get(url)).status_code == 403
    response = await operator_datasette.client.get(url)
    assert response.status_code == 200
    assert response.content == blob["body"]
    assert response.headers["content-type"] == "application/octet-stream"
    assert response.headers["content-disposition"].startswith("attachment")


async def test_shared_event_ids_list_every_row(datasette, manifest, capsem_home, cache_dir):
    session, defect = defect_sessions(manifest, "duplicate_event_id")[0]
    with ledger(capsem_home, session, cache_dir) as conn:
        event_id = conn.execute(
            f"SELECT event_id FROM {defect['table']} WHERE id = ?", [defect["row_id"]]
        ).fetchone()[0]
    data = (await datasette.client.get(event_url(session["id"], event_id, ".json"))).json()
    assert len(data["rows"]) >= 2
    assert any("share this event id" in note for note in data["notes"])


async def test_protocol_chatter_has_security_rows_but_no_primary_row(
    datasette, manifest, capsem_home, cache_dir
):
    session = clean_current(manifest)[0]
    with ledger(capsem_home, session, cache_dir) as conn:
        event_id = conn.execute(
            "SELECT event_id FROM security_rule_events WHERE event_type = 'mcp.tool_list' LIMIT 1"
        ).fetchone()[0]
    data = (await datasette.client.get(event_url(session["id"], event_id, ".json"))).json()
    assert data["rows"] == [] and data["security"]
    assert any("expected" in note for note in data["notes"])


async def test_bad_event_requests(datasette, manifest, capsem_home, cache_dir):
    session = clean_current(manifest)[0]
    with ledger(capsem_home, session, cache_dir) as conn:
        blob = conn.execute("SELECT id, event_id FROM event_body_blobs LIMIT 1").fetchone()
        other = conn.execute(
            "SELECT event_id FROM model_calls WHERE event_id != ? LIMIT 1", [blob["event_id"]]
        ).fetchone()[0]
    cases = [
        (event_url(session["id"], "ffffffffffff"), 404),
        (event_url(session["id"], "e" * 100), 400),
        (f"/-/capsem/sessions/{session['id']}/events/ab%00cd", 400),
        (event_url(session["id"], blob["event_id"], "/bodies/abc"), 400),
        (event_url(session["id"], blob["event_id"], "/bodies/" + "9" * 30), 400),
        (event_url(session["id"], other, f"/bodies/{blob['id']}"), 404),
        (event_url(session["id"], blob["event_id"], "/bodies/999999.json"), 404),
        (event_url("no-such-session", blob["event_id"]), 404),
    ]
    for url, status in cases:
        response = await datasette.client.get(url)
        assert response.status_code == status, (url, response.text[:200])
    old = of_era(manifest, "0.16")[0]
    response = await datasette.client.get(event_url(old["id"], "0123456789ab"))
    assert response.status_code == 404 and "predates event ids" in response.text


async def test_decode_json_sse_text_and_binary():
    pretty = bodies.decode_body(b'{"a":[1,2]}', "application/json")
    assert pretty["kind"] == "json" and pretty["text"] == '{\n  "a": [\n    1,\n    2\n  ]\n}'
    sse = bodies.decode_body(
        b'event: message_start\ndata: {"type":"message_start"}\n\ndata: [DONE]\n\n',
        "text/event-stream",
    )
    assert sse["kind"] == "sse" and len(sse["events"]) == 2
    assert sse["events"][0]["event"] == "message_start" and sse["events"][0]["json"]
    assert sse["events"][1]["data"] == "[DONE]"
    text = bodies.decode_body("héllo".encode(), "text/plain")
    assert text == {**text, "kind": "text", "text": "héllo", "valid_utf8": True}
    invalid = bodies.decode_body(b"caf\xe9 au lait", "text/plain")
    assert (
        invalid["kind"] == "text" and invalid["valid_utf8"] is False and "\ufffd" in invalid["text"]
    )
    binary = bodies.decode_body(bytes(range(256)) * 40, "application/octet-stream")
    assert binary["kind"] == "hex" and binary["hex_truncated"]
    assert binary["hex"][1] == {
        "offset": 16,
        "hex": bytes(range(16, 32)).hex(" "),
        "ascii": "." * 16,
    }
    assert bodies.decode_body(b"", None)["kind"] == "empty"
    huge = bodies.decode_body(b"x" * (bodies.DISPLAY_BYTES + 10), "text/plain")
    assert huge["display_truncated"] and len(huge["text"]) == bodies.DISPLAY_BYTES


async def test_hash_check():
    data = b"payload"
    good = "blake3:" + blake3.blake3(data).hexdigest()
    assert bodies.hash_verdict(data, good, 0) == "verified"
    assert bodies.hash_verdict(data, "blake3:" + "0" * 64, 0) == "mismatch"
    assert bodies.hash_verdict(data, None, 0) == "mismatch"
    # A truncated blob's hash covers the original bytes: it cannot be checked (spec §4.4).
    assert bodies.hash_verdict(data[:3], good, 1) == "unverifiable"


async def test_inline_limit_is_below_the_display_limit():
    assert events.INLINE_BODY_BYTES < bodies.DISPLAY_BYTES
