"""Every inline script on a Capsem page is one its Content-Security-Policy lets run (Datasette's
templates' scripts), and no script a page's data wrote is.

Chromium blocks an inline script whose hash the policy lacks; Datasette 1.0's templates carry
many (the version, the table's data, the SQL editor's schema), 0.65's a few. datasette-leaflet
and datasette-cluster-map (the test extra) add body scripts to every page: not to Capsem's.
"""

from __future__ import annotations

import re

import pytest

from datasette_capsem.core_pages.inline_scripts import SCRIPT, csp_hash, response_hashes
from tests.helpers import make_datasette, session_in

async_test = pytest.mark.asyncio(loop_scope="session")


def script_src(response) -> str:
    policy = response.headers["content-security-policy"]
    return re.search(r"script-src ([^;]*)", policy)[1]


@async_test
async def test_every_inline_script_of_a_capsem_page_is_allowed(capsem_home, manifest, tmp_path):
    datasette = await make_datasette(capsem_home, tmp_path / "cache")
    session = session_in(manifest, era="head", has=("clean",))
    db = session["id"]
    paths = [
        "/",
        f"/-/capsem/sessions/{db}",
        f"/{db}",
        f"/{db}/tool_calls",
        f"/{db}/tool_calls/1",
        f"/{db}?sql=select+1",
        "/main",
        "/main/sessions",
        "/-/versions",
        "/-/capsem",
        "/-/permissions",
    ]
    checked = 0
    for path in paths:
        response = await datasette.client.get(path, follow_redirects=True)
        allowed = script_src(response)
        assert "datasette.leaflet" not in response.text, path  # another plugin's body script
        for match in SCRIPT.finditer(response.text):
            if "src=" not in match["attrs"]:
                assert csp_hash(match["body"]) in allowed, (path, match["body"][:200])
                checked += 1
    assert checked >= len(paths)  # Datasette's menu script on every page, at least


def test_a_script_the_data_wrote_is_not_allowed():
    for script in (
        "alert(1)",
        "window._datasetteTableData = alert(1);",  # a template's shape, a call in its JSON hole
        'window._datasetteTableData = {"a": 1};alert(1);',
        "window.datasetteVersion = '1'+alert(1)+'';",
        "DATASETTE_ALLOW_FACET = alert(document.cookie);",
    ):
        assert response_hashes(f"<p>x</p><script>{script}</script>") == [], script
    # another plugin's body script is no template's: not allowed (and not rendered there)
    leaflet = "\nwindow.datasette = window.datasette || {};\n"
    assert response_hashes(f"<script>{leaflet}</script>") == []
