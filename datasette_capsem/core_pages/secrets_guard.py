"""Per-request secret policy: who may see credentials, and masking of what goes out.

Runs in the ASGI layer, outside Datasette's router, so it covers every route (core pages,
JSON, CSV, canned queries and plugin pages) in one place.
"""

from __future__ import annotations

import csv
import io
import json
import re
import sys

from datasette.utils import await_me_maybe
from datasette.utils.asgi import Request

from datasette_capsem import permissions, redaction
from datasette_capsem.config import PLUGIN_NAME
from datasette_capsem.ledger import tables
from datasette_capsem.queries.spec import sql_parameters
from datasette_capsem.state import get_state

TEXT_TYPES = (b"text/", b"application/json", b"application/xml")
UNMASKED_PREFIXES = ("/-/static/", "/-/static-plugins/")
# Raw bytes cannot be masked; these routes are refused to actors who may not see secrets.
RAW_SUFFIXES = (".db", ".blob")
# What every refusal page adds: how an operator grants the permission (README, Settings).
GRANT_HINT = (
    "An operator grants it with the view_secrets setting of the datasette-capsem plugin in "
    "metadata.yml, a Datasette allow block: view_secrets: {id: alice} for one actor, "
    "view_secrets: true for everyone (e.g. a single-user laptop)."
)


def refused(message: str) -> str:
    """A refusal's message, followed by how an operator grants access."""
    return f"{message} {GRANT_HINT}"


async def request_actor(datasette, scope, receive) -> dict | None:
    """The actor Datasette will see for this request (same hooks, same order)."""
    # Imported here: importing datasette.plugins loads every plugin's entry point, and doing
    # that while datasette_capsem itself is being imported registers a half-built module.
    from datasette.plugins import pm

    request = Request(scope, receive)
    for candidate in pm.hook.actor_from_request(datasette=datasette, request=request):
        actor = await await_me_maybe(candidate)
        if actor:
            return actor
    return None


SQL_PARAMETERS = ("sql", "_where")
SORT_PARAMETERS = frozenset({"_sort", "_sort_desc"})
FACET_PARAMETERS = frozenset({"_facet", "_facet_array", "_facet_date"})
COLUMN_VALUE_PARAMETERS = SORT_PARAMETERS | FACET_PARAMETERS


def hides_free_text(datasette) -> bool:
    """The operator setting `hide_free_text: true`: free text is hidden whole, not masked."""
    value = (datasette.plugin_config(PLUGIN_NAME) or {}).get("hide_free_text", False)
    return value is True or (isinstance(value, str) and value.lower() in ("true", "yes", "1"))


async def request_policy(datasette, actor, scope, receive, plugin_page: bool) -> str:
    if await permissions.can_view_secrets(datasette, actor):
        return redaction.OPEN
    # Plugin pages run only their own SQL; Datasette's routes run the actor's.
    if plugin_page:
        return redaction.MASK
    params = Request(scope, receive).args
    return redaction.HIDE_SQL if any(p in params for p in SQL_PARAMETERS) else redaction.HIDE


def _facet_column(value: str) -> str:
    """The column of a `_facet` value, also in its JSON syntax (`{"simple": "query"}`)."""
    if value.lstrip().startswith("{"):
        try:
            parsed = json.loads(value)
        except ValueError:
            return value
        if isinstance(parsed, dict):
            return " ".join(str(v) for v in parsed.values())
    return value


def _through_column(value: str) -> str:
    try:
        parsed = json.loads(value)
    except ValueError:
        return ""
    return str(parsed.get("column", "")) if isinstance(parsed, dict) else ""


# What each kind of column is to a viewer, for the refusals below.
KIND_REASONS = {
    tables.NAMED: (
        "a name an agent or a provider chose, which may carry a credential that reads masked "
        "for you: it can be faceted, or filtered by a whole value (=, !=, in, blank or not), "
        "but not sorted, compared or matched by a pattern"
    ),
    tables.CARRIER: "a credential carrier, hidden whole from you",
    tables.FREE_TEXT: "free text, masked (or hidden) for you",
    tables.UNCLASSIFIED: "a column no one has classified yet, hidden from you",
}
# Tables whose full-text index covers columns that are not shown raw (`_search` on them).
FTS_COLUMNS = {("index", "text_rows"): "body", ("index", "text_search"): "body"}


def probe_refusal(column: str, kind: str, table: str | None, what: str) -> str:
    """A refusal's message: which column, why it is not for this actor."""
    where = f"{table}.{column}" if table else column
    return refused(
        f"{what} on {where!r} would answer questions about its values, and it is "
        f"{KIND_REASONS.get(kind, KIND_REASONS[tables.UNCLASSIFIED])}: it needs the "
        "capsem-view-secrets permission."
    )


# The filters a NAMED column takes from a viewer: each compares the whole value, so it answers
# "is it exactly this?", which tells nothing about a credential inside one unless the reader
# guessed it whole (and a value that is itself masked is refused: `is this key here?`).
# Sorting is not among them: Datasette's `_next` for a sort is a `>` comparison.
NAMED_OPERATORS = frozenset(
    {"exact", "not", "in", "notin", "isnull", "notnull", "isblank", "notblank"}
)


def names_a_whole_value(operator: str, values: list[str]) -> bool:
    """A filter on a NAMED column a viewer may use: a whole-value comparison (or none), with
    no value the masker would change."""
    return operator in NAMED_OPERATORS and all(
        redaction.mask_free_text(value) == value for value in values
    )


def viewer_may_filter(database: str, table: str, key: str, values: list[str]) -> bool:
    """May a reader without view_secrets filter `table` by `key` (`column` or
    `column__operator`) with `values`? One rule for the guard and for the links pages draw."""
    column, _, operator = key.partition("__")
    kind = tables.column_kind(database, table, column.strip().strip('[]"`'))
    if kind == tables.NAMED:
        return names_a_whole_value(operator or "exact", values)
    return kind == tables.SHOWN


def viewer_may_sort(database: str, table: str | None, column: str) -> bool:
    """May a reader without view_secrets sort `table` by `column`? Only a column shown raw:
    a sort's next page is a `>` comparison with the last value shown. One rule for the guard
    and for the sort links a table page offers (`sort_links_for_viewer`)."""
    return tables.column_kind(database, table, column) == tables.SHOWN


def viewer_may_facet(database: str, table: str | None, column: str) -> bool:
    """May a reader without view_secrets facet `table` by `column`? A column shown raw, or a
    name an agent chose (NAMED: its facet values are masked, each a whole value)."""
    return tables.column_kind(database, table, column) in (tables.SHOWN, tables.NAMED)


def sort_links_for_viewer(database: str, table: str, columns: list[dict]) -> list[dict]:
    """Datasette's display columns of a table page, with no sort link (and so no column
    menu) on a column the guard would refuse to sort for this reader: a link that answers
    403 is a dead end. `templates/table.html` uses it."""
    return [
        {**c, "sortable": c.get("sortable") and viewer_may_sort(database, table, c["name"])}
        for c in columns
    ]


def facet_links_for_viewer(database: str, table: str, suggested: list[dict]) -> list[dict]:
    """Datasette's suggested facets of a table page without those the guard would refuse."""
    return [f for f in suggested if viewer_may_facet(database, table, f.get("name", ""))]


def column_probe(scope, receive, database: str, table: str | None) -> str | None:
    """Why the request's filter, sort, facet or search is refused, or None: on a column that
    is not shown raw (ledger/tables.py) each would be a yes/no oracle on the value even when
    the value itself reads as masked or hidden (a key drawn out of a DNS name by
    `__startswith` one character at a time). `database`: "ledger", "main" or "index";
    `table`: the table of the path, or None."""
    args = Request(scope, receive).args
    known = table is not None and table in tables.COLUMNS_OF_DATABASE.get(database, {})
    for key in args:
        if key in COLUMN_VALUE_PARAMETERS:
            what, candidates = "Sorting or faceting", []
            for value in args.getlist(key):
                candidates += _facet_column(value).split()
        elif key == "_through":
            what, candidates = "Filtering", [_through_column(v) for v in args.getlist(key)]
        elif key == "_search":
            covered = FTS_COLUMNS.get((database, table or ""))
            if covered is None and (known or table is None):
                continue
            what, candidates = "Full-text search", [covered or "*"]
        elif key.startswith("_search_"):
            what, candidates = "Full-text search", [key[len("_search_") :]]
        elif key.startswith("_") or table is None:
            continue
        elif not known and "__" not in key:
            continue  # a canned query's parameter (an unknown table's columns read as NULL)
        else:
            name = key.split("__")[0].strip().strip('[]"`')
            if name and not viewer_may_filter(database, table, key, args.getlist(key)):
                kind = tables.column_kind(database, table, name)
                return probe_refusal(name, kind, table, "Filtering")
            continue
        for column in candidates:
            name = column.strip().strip('[]"`')
            if not name:
                continue
            kind = (
                tables.column_kind(database, table, name) if name != "*" else (tables.UNCLASSIFIED)
            )
            if key in SORT_PARAMETERS:
                allowed = viewer_may_sort(database, table, name)
            elif key in FACET_PARAMETERS:
                allowed = name != "*" and viewer_may_facet(database, table, name)
            else:
                allowed = kind == tables.SHOWN
            if not allowed:
                return probe_refusal(name, kind, table, what)
    return None


# A parameter's comparison in a canned query: the text from the boolean word or bracket
# before `:name` to the one after it (`i.value = :value`, `(:q = '' OR qname LIKE :q)`).
_TERM_EDGE = re.compile(
    r"(?i)\b(?:where|and|or|on|when|then|having|else|end|union|select|from|group|order|limit)\b"
    r"|[(),;]"
)
_IDENTIFIER = re.compile(r"(?:[A-Za-z_][A-Za-z0-9_]*\.)?([A-Za-z_][A-Za-z0-9_]*)")


# A term that only says `column = :parameter` (either way round): a whole-value comparison.
_EQUALITY_TERM = re.compile(
    r"\s*(?:[A-Za-z_][A-Za-z0-9_.]*\s*==?\s*|==?\s*[A-Za-z_][A-Za-z0-9_.]*)\s*"
)


def _compared_names(sql: str, parameter: str) -> dict[str, bool]:
    """Column names compared with `:parameter` anywhere in `sql` (their term of a condition),
    each with whether every term naming it is a plain equality."""
    found: dict[str, bool] = {}
    for match in re.finditer(rf":{re.escape(parameter)}\b", sql):
        before = [m.end() for m in _TERM_EDGE.finditer(sql, 0, match.start())]
        after = _TERM_EDGE.search(sql, match.end())
        term = sql[before[-1] if before else 0 : after.start() if after else len(sql)]
        term = re.sub(r"'[^']*'|:[A-Za-z_][A-Za-z0-9_]*", " ", term)
        equality = _EQUALITY_TERM.fullmatch(term) is not None
        for name in {m.group(1).lower() for m in _IDENTIFIER.finditer(term)}:
            found[name] = found.get(name, True) and equality
    return found


def canned_parameter_refusal(database: str, query: dict, args) -> str | None:
    """Why a canned query's parameters are refused to a reader who may not see secrets, or
    None: a parameter compared with a column that is not shown raw in any table of the
    database (ledger/tables.py) would answer yes/no questions about its values, as a filter
    would (`column_probe`). An empty parameter compares nothing and is let through."""
    sql = query.get("sql") or ""
    kinds = tables.COLUMNS_OF_DATABASE.get(database, {})
    for parameter in sorted(set(query.get("params") or []) | sql_parameters(sql)):
        if not args.get(parameter):
            continue
        for name, equality in sorted(_compared_names(sql, parameter).items()):
            hidden = {kind for table in kinds.values() if (kind := table.get(name))} - {
                tables.SHOWN
            }
            value = str(args.get(parameter))
            if hidden == {tables.NAMED} and equality and names_a_whole_value("exact", [value]):
                continue  # `tool_name = :tool`: a whole value, as a facet's link filters
            if hidden:
                return probe_refusal(
                    name, sorted(hidden)[0], None, f"The parameter {parameter!r} compared"
                )
    return None


# --- bad input Datasette 0.65 answers with a 500 -----------------------------------------------


def core_parameter_problem(path: str, args) -> str | None:
    """Why a core Datasette request's parameters cannot be answered, or None (checked before
    Datasette sees them: each of these is a 500 and a traceback in 0.65)."""
    if "_sort" in args and "_sort_desc" in args:
        return "_sort and _sort_desc cannot be combined: sort by one column"
    for value in args.getlist("_facet"):
        if value.lstrip().startswith("{"):
            try:
                parsed = json.loads(value)
            except ValueError:
                return '_facet in JSON form must be an object like {"simple": "column"}'
            if not (
                isinstance(parsed, dict)
                and len(parsed) == 1
                and set(parsed) <= {"simple", "array", "date"}
                and all(isinstance(v, str) and v for v in parsed.values())
            ):
                return '_facet in JSON form must be an object like {"simple": "column"}'
    for value in args.getlist("_through"):
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = None
        if not (
            isinstance(parsed, dict)
            and all(isinstance(parsed.get(k), str) for k in ("table", "column"))
            and isinstance(parsed.get("value"), (str, int, float))
        ):
            return "_through must be a JSON object with table, column and value"
    segments = path.strip("/").split("/")
    if len(segments) == 1 and "sql" not in args:
        if segments[0].endswith(".csv"):
            return "A database has no CSV form: ask for a table's CSV, or pass ?sql="
        if segments[0].endswith(".json") and args.get("_shape") not in (None, "objects"):
            return "A database's JSON has no _shape: ask for a table's JSON, or pass ?sql="
    return None


# --- what goes out -------------------------------------------------------------------------------

CSV_FORMULA = re.compile(r"^[=+\-@\t\r]")
CSV_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def neutralise_csv(text: str) -> str:
    """Cells a spreadsheet would run as a formula (=, +, -, @ first) get a leading quote;
    plain numbers (-1.5) are left as they are."""
    if not any(c in text for c in "=+-@\t\r"):
        return text
    csv.field_size_limit(sys.maxsize)  # ledger cells reach megabytes
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    for row in csv.reader(io.StringIO(text, newline="")):
        writer.writerow(
            "'" + cell if CSV_FORMULA.match(cell) and not CSV_NUMBER.match(cell) else cell
            for cell in row
        )
    return out.getvalue()


def private_paths(datasette) -> list[tuple[str, str]]:
    """(absolute path, placeholder) of the Capsem home, run dir and cache, longest first: a
    path below them keeps its relative part (`$CAPSEM_HOME/run/sessions/<id>/session.db`)."""
    settings = get_state(datasette).settings
    pairs = []
    places = [(settings.cache_dir.parent, "$DATASETTE_CAPSEM_CACHE")]
    if settings.labelled:  # each labelled home by its label; homes_dir covers its children
        for home in settings.homes:
            if home.capsem_home not in home.run_dir.parents:
                places.append((home.run_dir, f"$CAPSEM_RUN_DIR[{home.label}]"))
            places.append((home.capsem_home, f"$CAPSEM_HOME[{home.label}]"))
        if settings.homes_dir is not None:
            places.append((settings.homes_dir, "$CAPSEM_HOMES_DIR"))
    else:
        if settings.capsem_home not in settings.run_dir.parents:
            places.append((settings.run_dir, "$CAPSEM_RUN_DIR"))
        places.append((settings.capsem_home, "$CAPSEM_HOME"))
    for path, label in places:
        for form in {str(path), str(path.resolve())}:
            if len(form) > 1:
                pairs.append((form, label))
    return sorted(pairs, key=lambda pair: -len(pair[0]))


def scrub_paths(text: str, pairs: list[tuple[str, str]]) -> str:
    for path, label in pairs:
        if path in text:
            text = text.replace(path, label)
    return text


def refuses_raw(path: str) -> bool:
    return path.split("?", 1)[0].endswith(RAW_SUFFIXES)


def _is_text(headers: list[tuple[bytes, bytes]]) -> bool:
    for name, value in headers:
        if name.lower() == b"content-type":
            return value.lower().startswith(TEXT_TYPES)
    return False


def _is_csv(path: str, headers: list[tuple[bytes, bytes]]) -> bool:
    """A CSV answer: text/csv, or a `.csv` path answered as plain text (Datasette's CSV
    without `_dl`). An HTML or JSON page at a `.csv` path (a 400) is not CSV."""
    for name, value in headers:
        if name.lower() == b"content-type":
            kind = value.lower()
            if kind.startswith(b"text/csv"):
                return True
            if not kind.startswith(b"text/plain"):
                return False
    return path.split("?", 1)[0].endswith(".csv")


def masking_send(send, path: str, *, mask: bool, paths: list[tuple[str, str]] | None):
    """Buffer a text response and send it, with a corrected length, after: secrets masked
    (`mask`), the private filesystem paths replaced (`paths`), CSV formulas neutralised."""
    if path.startswith(UNMASKED_PREFIXES):
        return send
    start: dict | None = None
    chunks: list[bytes] = []

    async def wrapped(message):
        nonlocal start
        if message["type"] == "http.response.start":
            if not _is_text(list(message.get("headers") or [])):
                start = None
                await send(message)
                return
            start = message
            return
        if message["type"] != "http.response.body" or start is None:
            await send(message)
            return
        chunks.append(message.get("body", b""))
        if message.get("more_body"):
            return
        text = b"".join(chunks).decode("utf-8", "replace")
        if mask:
            text = redaction.mask_text_memo(text)
        if paths:
            text = scrub_paths(text, paths)
        if _is_csv(path, list(start.get("headers") or [])):
            text = neutralise_csv(text)
        body = text.encode("utf-8")
        headers = [(k, v) for k, v in start.get("headers") or [] if k.lower() != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        await send({**start, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return wrapped
