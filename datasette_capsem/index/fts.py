"""Full-text queries over the index: the query language, filters, ranking and snippets.

The query is FTS5's syntax, made forgiving for what people paste: a bare word that FTS5 would
refuse (`evil.example`, `rm -rf`'s `-rf`, `/etc/passwd`, `run_shell_command`) is searched as
the phrase of its tokens, keeping a trailing `*` (prefix). Quoted phrases, `AND`, `OR`, `NOT`,
`NEAR(...)`, parentheses and `word*` pass through. What FTS5 still refuses (an unbalanced
quote, `NOT` with nothing before it) raises `QuerySyntaxError` with FTS5's own words, which
the page answers as a 400.

Hits are ranked by bm25 (best first); the snippet marks matched tokens with private-use
characters that indexed text never contains (text.MARK_OPEN/MARK_CLOSE), so a page splits it
into parts and escapes every part: a ledger value cannot forge or break the highlight.

What a search costs is bounded by what it shows, not by what it matches. A prefix query that
matches more than `RANK_BOUND` documents (`a*` matches 100,000 rows of one 300,000-row ledger)
ranks the first `RANK_BOUND` matches in index order only, and says so (`TextResult.partial`);
the count stops at `COUNT_CAP`. Snippets are cut from the shown rows alone: their text is
matched again in a small in-memory FTS5 table with the index's tokenizer, which gives FTS5's
own snippet of each row (a snippet depends on its row and the query only) without expanding
the prefix over the whole index's postings.
"""

from __future__ import annotations

import functools
import re
import sqlite3
import threading
from dataclasses import dataclass, field
from typing import Any

from datasette_capsem.index.text import KINDS, MARK_CLOSE, MARK_OPEN
from datasette_capsem.ledger.dialect import render_sql
from datasette_capsem.sqlfiles import load_sql

MAX_QUERY_CHARS = 512
MAX_LIMIT = 200
COUNT_CAP = 10_000
# A prefix query matching more documents than this ranks the first RANK_BOUND matches only.
RANK_BOUND = 2_000
SNIPPET_TOKENS = 24
OPERATORS = frozenset({"AND", "OR", "NOT", "NEAR"})
_PIECE = re.compile(r'"(?:[^"]|"")*"\*?|"|[(),]|[^\s"(),]+')
_BARE = re.compile(r"\w+\*?")


class QuerySyntaxError(ValueError):
    """A query FTS5 cannot parse, in words a reader can act on."""


@dataclass(frozen=True)
class TextFilters:
    kinds: tuple[str, ...] = ()
    sessions: tuple[str, ...] = ()
    provider: str | None = None
    model: str | None = None
    since: str | None = None  # ISO date or time, inclusive
    until: str | None = None  # ISO date or time; a bare date includes its whole day


@dataclass
class TextResult:
    hits: list[dict[str, Any]] = field(default_factory=list)
    total: int = 0
    total_capped: bool = False
    fts_query: str = ""
    # Ranked among the first `ranked` matches in index order only (a prefix query matching
    # more than RANK_BOUND documents): the hits are the best of those, not of every match.
    partial: bool = False
    ranked: int | None = None


def has_prefix(expression: str) -> bool:
    """Whether an FTS5 expression (`to_fts`) holds a prefix term (`word*`, `"a phrase"*`)."""
    return any(piece.endswith("*") for piece in _PIECE.findall(expression))


def to_fts(query: str) -> str:
    """The FTS5 expression for a reader's query (see the module docstring)."""
    text = query.strip()
    if not text:
        raise QuerySyntaxError("The search is empty.")
    pieces = []
    for piece in _PIECE.findall(text):
        if piece == '"':
            raise QuerySyntaxError(
                "A double quote is not closed: a phrase goes between two double quotes, "
                'e.g. "rm -rf".'
            )
        passes = piece.startswith('"') or piece in ("(", ")", ",") or piece in OPERATORS
        if passes or _BARE.fullmatch(piece):
            pieces.append(piece)
        else:
            star = "*" if piece.endswith("*") else ""
            inner = piece[:-1] if star else piece
            pieces.append('"' + inner.replace('"', '""') + '"' + star)
    return " ".join(pieces)


def _where(filters: TextFilters) -> tuple[list[str], dict[str, Any]]:
    clauses, params = [], {}
    if filters.kinds:
        names = [f":kind{i}" for i in range(len(filters.kinds))]
        clauses.append(f"r.kind IN ({', '.join(names)})")
        params.update({f"kind{i}": k for i, k in enumerate(filters.kinds)})
    if filters.sessions:
        names = [f":session{i}" for i in range(len(filters.sessions))]
        clauses.append(f"r.session_id IN ({', '.join(names)})")
        params.update({f"session{i}": s for i, s in enumerate(filters.sessions)})
    if filters.provider:
        clauses.append("r.provider = :provider")
        params["provider"] = filters.provider
    if filters.model:
        clauses.append("r.model = :model")
        params["model"] = filters.model
    if filters.since:
        clauses.append("r.at >= :since")
        params["since"] = filters.since
    if filters.until:
        clauses.append(
            "r.at < :until" if len(filters.until) > 10 else "substr(r.at, 1, 10) <= :until"
        )
        params["until"] = filters.until
    return clauses, params


def _explain(error: sqlite3.Error) -> QuerySyntaxError:
    detail = str(error).removeprefix("fts5: ")
    return QuerySyntaxError(
        f"The search cannot be read ({detail}). Words are matched whole; put a phrase in "
        'double quotes ("rm -rf"), end a word with * for a prefix (migrat*), and combine with '
        "AND, OR, NOT (between two terms) or NEAR(a b)."
    )


def search(
    conn: sqlite3.Connection,
    query: str,
    filters: TextFilters | None = None,
    *,
    limit: int = 50,
    offset: int = 0,
) -> TextResult:
    """Ranked hits of `query` (a reader's query) over the index's text, with snippets."""
    filters = filters or TextFilters()
    expression = to_fts(query)
    clauses, params = _where(filters)
    params.update(fts=expression, limit=max(1, min(limit, MAX_LIMIT)), offset=max(0, offset))
    where = "".join(f" AND {c}" for c in clauses)
    count_sql = load_sql(__package__, "text_count" if clauses else "text_count_plain")
    count_sql = render_sql(count_sql, fragments={"where": where})
    try:
        total = conn.execute(count_sql, {**params, "cap": COUNT_CAP + 1}).fetchone()[0]
        bounded = has_prefix(expression) and total > RANK_BOUND
        name = "text_ranked_bounded" if bounded else "text_ranked"
        ranked_sql = render_sql(load_sql(__package__, name), fragments={"where": where})
        ranked = conn.execute(ranked_sql, {**params, "bound": RANK_BOUND}).fetchall()
    except sqlite3.OperationalError as error:
        if "fts5" in str(error) or "syntax" in str(error) or "unterminated" in str(error):
            raise _explain(error) from error
        raise
    hits = []
    if ranked:
        snippets = _snippets(conn, expression, [row[0] for row in ranked])
        for row in ranked:
            hit = dict(row)
            hit["snippet_parts"] = split_snippet(snippets.get(row[0], ""))
            hit["snippet"] = "".join(part["text"] for part in hit["snippet_parts"])
            hits.append(hit)
    result = TextResult(hits, min(total, COUNT_CAP), total > COUNT_CAP, expression)
    if bounded:
        result.partial, result.ranked = True, RANK_BOUND
    return result


@functools.cache
def _tokenizer() -> str:
    """The index's FTS5 tokenizer, as its DDL declares it (create.sql)."""
    found = re.search(r"tokenize\s*=\s*'([^']*)'", load_sql(__package__, "create"))
    if found is None:
        raise RuntimeError("create.sql declares no tokenizer for text_search")
    return found.group(1)


_snippet_tables = threading.local()


def _snippet_table() -> sqlite3.Connection:
    """This thread's in-memory FTS5 table (the index's tokenizer) for a page's snippets."""
    conn = getattr(_snippet_tables, "conn", None)
    if conn is None:
        conn = sqlite3.connect(":memory:")
        tokenize = _tokenizer().replace("'", "''")
        conn.execute(f"CREATE VIRTUAL TABLE shown USING fts5(body, tokenize = '{tokenize}')")
        _snippet_tables.conn = conn
    return conn


def _snippets(conn: sqlite3.Connection, expression: str, rowids: list[int]) -> dict[int, str]:
    """Snippets of the few rows shown (computed after ranking, not for every match), cut
    from those rows alone (see the module docstring)."""
    placeholders = ", ".join("?" for _ in rowids)
    sql = render_sql(load_sql(__package__, "text_bodies"), fragments={"rowids": placeholders})
    bodies = conn.execute(sql, rowids).fetchall()
    shown = _snippet_table()
    try:
        shown.executemany("INSERT INTO shown (rowid, body) VALUES (?, ?)", bodies)
        params = [MARK_OPEN, MARK_CLOSE, SNIPPET_TOKENS, expression]
        sql = render_sql(load_sql(__package__, "text_snippets"))
        found = shown.execute(sql, params).fetchall()
    finally:
        shown.execute("DELETE FROM shown")
    return dict(found)


def split_snippet(snippet: str) -> list[dict[str, Any]]:
    """[{"text", "hit"}]: the snippet as plain text parts, the matched ones flagged."""
    parts: list[dict[str, Any]] = []
    for index, chunk in enumerate(re.split(f"[{MARK_OPEN}{MARK_CLOSE}]", snippet or "")):
        if chunk:
            parts.append({"text": chunk, "hit": index % 2 == 1})
    return parts


def check_kinds(kinds: list[str]) -> tuple[str, ...]:
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise ValueError(f"Unknown kind {unknown[0]!r}; kinds are {', '.join(KINDS)}.")
    return tuple(dict.fromkeys(kinds))


SESSION_DOCS_CAP = 100_000  # matching documents grouped by session, at most


@dataclass
class SessionCounts:
    """The sessions a query's hits are in: [{session_id, hits, last_at}], most hits first;
    `capped` when more documents matched than were grouped (the counts are then lower bounds)."""

    sessions: list[dict[str, Any]] = field(default_factory=list)
    capped: bool = False


def session_counts(
    conn: sqlite3.Connection,
    query: str,
    filters: TextFilters | None = None,
    *,
    cap: int = SESSION_DOCS_CAP,
) -> SessionCounts:
    """The hits of `query` (a reader's query, with `filters`) grouped by session."""
    filters = filters or TextFilters()
    expression = to_fts(query)
    clauses, params = _where(filters)
    params.update(fts=expression, cap=cap + 1)
    where = "".join(f" AND {c}" for c in clauses)
    sql = render_sql(load_sql(__package__, "text_sessions"), fragments={"where": where})
    try:
        rows = [dict(row) for row in conn.execute(sql, params)]
    except sqlite3.OperationalError as error:
        if "fts5" in str(error) or "syntax" in str(error) or "unterminated" in str(error):
            raise _explain(error) from error
        raise
    return SessionCounts(rows, sum(row["hits"] for row in rows) > cap)
