"""Which inline scripts a Capsem page's Content-Security-Policy lets run: those of the installed
Datasette's own templates; never one that a page's data could have written.

Datasette 0.65's templates have a few fixed inline scripts; 1.0's have many, some carrying the
page's data (`window._datasetteTableData = {{ table_page_data|tojson }};`, the SQL editor's
schema) or the version (`window.datasetteVersion = '{{ datasette_version }}';`). Each template
script is read from the installed Datasette, never copied here: one without Jinja is hashed
once (`STATIC_HASHES`, in every page's policy); one with Jinja becomes a shape whose literal
text must match exactly, whose `{{ …|tojson }}` holes must hold JSON (inert: a value, never a
call) and whose other holes a plain token (a version, `true`, a path). A page's inline script
of such a shape is hashed into that response's policy (`response_hashes`).

Other plugins' `extra_body_script` output (datasette-leaflet's settings on every page) is not
rendered on pages under this policy at all (`extra_template_vars` in `__init__.py` empties
`body_scripts` there): a plugin's script is not ours to vouch for beside Capsem data.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from functools import cache
from importlib import resources

SCRIPT = re.compile(r"<script(?P<attrs>(?:\s[^>]*)?)>(?P<body>.*?)</script>", re.S | re.I)
JINJA = re.compile(r"(\{\{.*?\}\}|\{%.*?%\})", re.S)
TOKEN_HOLE = r"[\w.:/%~+-]*"  # a version, true/false, a path: no quote, space or bracket


def csp_hash(script: str) -> str:
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    return f"'sha256-{digest}'"


def _template_scripts() -> list[str]:
    """The body of every inline (no `src`) script in the installed Datasette's templates."""
    folder = resources.files("datasette").joinpath("templates")
    scripts = []
    for template in sorted(folder.iterdir(), key=lambda entry: entry.name):
        if not template.name.endswith(".html"):
            continue
        for match in SCRIPT.finditer(template.read_text()):
            if "src=" not in match["attrs"] and "{{ body_script" not in match["body"]:
                scripts.append(match["body"])
    return scripts


def _literal(text: str) -> str:
    """A template's literal text as a pattern; Jinja may trim or keep whitespace around tags."""
    return r"\s*".join(re.escape(part) for part in re.split(r"\s+", text))


def _shape(script: str) -> tuple[re.Pattern, int] | None:
    """A template script with Jinja as (pattern, number of JSON holes), or None when it uses a
    construct other than output, if/elif/else and for (such a script stays blocked)."""
    branches: list[list[list[str]]] = [[[]]]  # a stack of if/for blocks, each a list of branches
    kinds: list[str] = []
    holes = 0
    for part in JINJA.split(script):
        current = branches[-1][-1]
        if part.startswith("{{"):
            if re.search(r"\|\s*tojson\b", part):
                current.append(f"(?P<json{holes}>.*?)")
                holes += 1
            else:
                current.append(TOKEN_HOLE)
        elif part.startswith("{%"):
            word = part.strip("{%-+ \n").split(None, 1)[0]
            if word in ("if", "for"):
                kinds.append(word)
                branches.append([[]])
            elif word in ("elif", "else") and kinds:
                branches[-1].append([])
            elif word in ("endif", "endfor") and kinds and kinds[-1] == word[3:]:
                kind, block = kinds.pop(), branches.pop()
                alternatives = "|".join("".join(branch) for branch in block)
                if kind == "for":
                    branches[-1][-1].append(f"(?:{alternatives})*")
                else:
                    empty = "" if len(block) > 1 else "|"
                    branches[-1][-1].append(f"(?:{alternatives}{empty})")
            else:
                return None
        else:
            current.append(_literal(part))
    if kinds:
        return None
    return re.compile(r"\s*" + "".join(branches[0][0]) + r"\s*", re.S), holes


@cache
def _template_knowledge() -> tuple[frozenset[str], tuple[tuple[re.Pattern, int], ...]]:
    static, shapes = set(), []
    for script in _template_scripts():
        if not JINJA.search(script):
            static.add(csp_hash(script))
        elif (shape := _shape(script)) is not None:
            shapes.append(shape)
    return frozenset(static), tuple(shapes)


def static_hashes() -> str:
    """CSP hashes of the installed Datasette's inline template scripts that have no Jinja."""
    return " ".join(sorted(_template_knowledge()[0]))


def _of_a_template(script: str) -> bool:
    for pattern, holes in _template_knowledge()[1]:
        match = pattern.fullmatch(script)
        if match is None:
            continue
        try:
            for hole in range(holes):
                value = match[f"json{hole}"]
                if value is not None:
                    json.loads(value)
        except ValueError:
            continue
        return True
    return False


def response_hashes(html: str) -> list[str]:
    """CSP hashes of the inline scripts of `html` that a template's shape accounts for, beyond
    `static_hashes()`."""
    static = _template_knowledge()[0]
    found = []
    for match in SCRIPT.finditer(html):
        if "src=" in match["attrs"]:
            continue
        script = match["body"]
        digest = csp_hash(script)
        if digest in static or digest in found:
            continue
        if _of_a_template(script):
            found.append(digest)
    return found
