"""What counts as a credential in a Capsem ledger, and how it is kept from actors who may not
see it. One policy, in this module, applied to every surface:

* **Credential carriers** (request/response headers, URL query strings, cookies, registry env,
  substitution values) are hidden whole: the value becomes `HIDDEN`, a visible marker.
* **Free text** (bodies, prompts, reply text, tool arguments and results, commands and their
  output, JSON event fields) is shown with every credential masked (`mask_text`, the rules
  below): what a reader would see is masked, not the bytes as stored, so JSON escapes,
  URL-encoding and HTML entities are decoded first. A marker (`[redacted:kind]`) shows each
  masked value. With the plugin setting `hide_free_text: true` free text is hidden whole too.
* **Bytes** are decoded as a reader would (`decode_body_text`: gzip, deflate, brotli, zstd,
  base64 that the content type declares, UTF-16/32; other bytes as latin-1, which keeps every
  byte) and masked before any hex dump or download; bytes that decode to nothing readable are
  hidden whole (`HIDDEN_BODY`).
* **Streams** (server-sent events) are shown assembled: every event that adds a fragment of
  the reply, the thinking or a tool call's arguments loses its data to `STREAMED_FRAGMENT`, and
  the text they assemble to is masked as a whole (`mask_stream`), since a credential written
  through a stream arrives in pieces too short for any rule.

How well the rules do is measured both ways (tests/test_mask_corpus.py,
benchmarks/bench_mask.py): recall on a corpus of 184 credential kinds x 5 placements x 15
encodings, precision on secret-free prose and code.

Where each surface applies it:

* Datasette's own routes: every row a ledger query returns goes through `redact_cell`
  (a row factory installed by `apply_policy`), so JSON in every shape, CSV, HTML and facets see
  the redacted value, decoded, before any encoding. When the actor writes the SQL (`sql=`,
  `_where=`), the secret-bearing columns also read as NULL through a SQLite authorizer: a
  transformation (substr, hex, replace) could otherwise carry a secret past the masker.
* Plugin pages: the data of every page goes through `redact_tree` (views/render.py). A row a
  page shows goes through `project_row` first (each column as the registry classifies it,
  so `hide_free_text` hides a free-text `path` as well as a `command`), and any text a page
  builds from free text (a label, a title, a preview, a summary) through `viewer_free_text`
  (masked, or hidden whole under `hide_free_text`). A trace for a reader who may see no free
  text is built from its rows with every free-text column hidden
  (graph/trace_rows.without_free_text), so no label derived from one carries it.
* Every text response of every route: `mask_text` over the whole body, and filesystem paths of
  the Capsem home and the cache are replaced (core_pages/secrets_guard.py), as a last net.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import codecs
import contextvars
import hashlib
import itertools
import json
import math
import re
import sqlite3
import threading
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterator
from html.entities import html5
from typing import Any

from datasette_capsem import streams

try:  # brotli and zstd bodies are decoded when these are installed, else hidden whole
    import brotli
except ImportError:  # pragma: no cover
    brotli = None
try:
    import zstandard
except ImportError:  # pragma: no cover
    zstandard = None
from datasette_capsem.ledger import tables

# Policy for the current request, read by the database layer in its worker thread. HIDE_SQL is
# HIDE for requests that carry the actor's own SQL (`sql=`, `_where=`).
OPEN, MASK, HIDE, HIDE_SQL = "open", "mask", "hide", "hide-sql"
policy: contextvars.ContextVar[str] = contextvars.ContextVar("capsem_secret_policy", default=OPEN)
# The operator's `hide_free_text` setting, for the current request (False for OPEN).
hide_free_text: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "capsem_hide_free_text", default=False
)

HIDDEN = "[hidden: may contain credentials]"
# Bump when what `mask_text` masks changes: text stored masked (the cross-session index) is
# then rebuilt. 2: issue 25's masker (decoded reading, key names, argv, dotfiles, streams).
# 3: a window of form-encoded text beside a base64 value read both ways (`+` a space, or not).
MASKER_VERSION = 3

# What a viewer sees of each column is decided once, in the registry of tables
# (ledger/tables.py: shown, carrier, free text, or unclassified). The row factory sees result
# names only, so a name that is a carrier (or free text) in any table is one wherever it is
# met; the SQLite authorizer sees (table, column) and applies the registry exactly.
# Credential carriers: hidden whole.
CARRIER_COLUMNS = tables.names_of_kind(tables.CARRIER)
# Names of SQLite's own results (PRAGMA table_info, sqlite_master) that Datasette reads through
# the same connection: never hidden by name (a free-text column of that name, a file's `name`,
# is hidden by the authorizer instead, `_authorizer`).
META_NAMES = frozenset({"name", "type", "sql", "tbl_name", "cid", "seq"})
# Free text: shown masked (hidden whole with `hide_free_text`).
FREE_TEXT_COLUMNS = tables.names_of_kind(tables.FREE_TEXT) - CARRIER_COLUMNS - META_NAMES
# Names that are also ordinary fields of plugin pages' data (a link's `path`, an error's
# `message`): hidden by name only in rows of Datasette's routes, not in plugin trees.
_GENERIC_FIELDS = frozenset(
    {
        "path",
        "label",
        "detail",
        "error",
        "message",
        "problem",
        "marker",
        "failed",
        "subject",
        "block",
        "term",
        "callback",
        "evidence",
        "filename",
        "file_name",
        "directory",
    }
)
# Plugin-page fields (OTLP attributes, body views) that carry free text under another name.
FREE_TEXT_FIELDS = (FREE_TEXT_COLUMNS - _GENERIC_FIELDS) | {
    "input.value",
    "output.value",
    "tool.parameters",
    "process.command_line",
    "text",
    "data",
    "json",
    "snippet",
}
UNCLASSIFIED_HIDDEN = "[hidden: unclassified column]"
# Secret-bearing columns whose names are SQL keywords. Datasette's table page selects them as
# `[query]`; hidden by the authorizer, SQLite would rename the result column after that text
# and the page would fail. So they are hidden only from the actor's own SQL (the row factory
# hides them on every other query).
KEYWORD_SECRET_COLUMNS = frozenset({"query"})
SECRET_COLUMNS = (CARRIER_COLUMNS | FREE_TEXT_COLUMNS) - KEYWORD_SECRET_COLUMNS
ALL_SECRET_COLUMNS = SECRET_COLUMNS | KEYWORD_SECRET_COLUMNS

# --- the masker ------------------------------------------------------------------------------
#
# `mask_text` finds the spans of credential values in a text and replaces each with a visible
# `[redacted:kind]` marker; the names around them (`password=`, `Authorization: Bearer`) stay.
# It looks at the text as stored and at the text as a reader sees it: JSON escapes
# (`\u0070assword`, `\/`), URL-encoding (`password%3D`, `+`) and HTML entities (`&#61;`) are
# decoded, up to three deep, and a value found there is masked in the stored text (whole
# escapes). Bytes (`mask_bytes`) are decoded before: compressed bodies (gzip, deflate, brotli,
# zstd), UTF-16/32, base64 that the content type declares; bytes that decode to nothing
# readable are hidden whole (`HIDDEN_BODY`), never shown.
#
# What is a credential, decided once (the rules below, in this order of cost):
# * known token formats of ~70 providers (`TOKENS`: the prefixes and lengths are public facts,
#   checked against the gitleaks rule set), matched even glued to other letters or bytes;
# * JWTs, PEM private keys, URL userinfo in every form (empty user, `@` in the password, a
#   token as the user), webhook URLs;
# * credential headers (`Authorization`, `Cookie`, `X-API-Key`...) and `Bearer`/`Basic`
#   schemes;
# * a value whose key names a secret (`_secret_key`), over any casing and separator
#   (`PGPASSWORD`, `SecretAccessKey`, `accessToken`, `pw`, `X-Amz-Signature`), in the forms
#   env, JSON, YAML, TOML, INI, XML, PHP, Go, HTML attributes, `{"name": X, "value": V}`
#   lists, argv (`--password V`, `-p V` for programs known to take one), dotfiles (.netrc,
#   .pgpass, cookie jars);
# * a long random token right after a secret-ish word (`the new secret is 7Gk...`).
#
# Every rule runs only when one of its trigger words occurs in the lowered text and, for the
# costly ones, when a cheap necessary condition (its prefilter) holds on the lowered text; a
# short text with no trigger, token run or escape at all is returned after one scan (`_MAYBE`).
# Every pattern is ASCII-only (`re.ASCII`): lowering never removes an ASCII match, so a
# prefilter on the lowered text is a sound necessary condition, and a case-insensitive rule
# runs case-sensitively over the lowered text when lowering moved no character (`Rule.lowered`).
# Known tokens are looked for only in the runs of token characters (`_token_spans`), keyed
# values from each secret word back to its key name (`_keyed_spans`), and the decoded reading
# only around escapes that decode to ASCII (`_decoded_spans`): the cost stays linear in the
# text, hostile text included (benchmarks/bench_mask.py).

_FLAGS = re.ASCII
_I = re.ASCII | re.IGNORECASE
# A quote as it appears raw, JSON-escaped (any depth), or HTML-escaped.
_QUOTE = r"(?:'\\*\"'\\*\"'|\\*[\"']|&#34;|&quot;|&#39;|&#x27;)"
_NOT_REDACTED = r"(?!\[(?:redacted|hidden))"

HIDDEN_BODY = "[hidden: a body that cannot be decoded to text]"

# (triggers, pattern) of known token formats. A pattern is the whole token; one that starts
# with a distinctive prefix matches glued to what precedes it (inside a binary body).
TOKENS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("a3t", "akia", "asia", "abia", "acca"), r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}"),
    (("aiza",), r"AIza[0-9A-Za-z_-]{30,}"),
    (("ya29.",), r"ya29\.[0-9A-Za-z_-]{16,}"),
    (("gocspx-",), r"GOCSPX-[0-9A-Za-z_-]{20,}"),
    (("q~",), r"[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.-]{31,34}"),
    (("ltai",), r"LTAI[A-Za-z0-9]{20}"),
    (("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), r"gh[pousr]_[A-Za-z0-9]{30,}"),
    (("github_pat_",), r"github_pat_[A-Za-z0-9_]{20,}"),
    (
        (
            "glpat-",
            "glrt-",
            "gldt-",
            "glptt-",
            "glcbt-",
            "glft-",
            "glimt-",
            "glagent-",
            "gloas-",
            "glsoat-",
            "glffct-",
        ),
        r"gl(?:pat|rt|dt|ptt|cbt|ft|imt|agent|oas|soat|ffct)-[0-9A-Za-z_-]{16,}",
    ),
    (("atbb",), r"ATBB[A-Za-z0-9]{24,}"),
    (("atatt3",), r"ATATT3[A-Za-z0-9_=-]{30,}"),
    (("ccipat_",), r"CCIPAT_[A-Za-z0-9_]{20,}"),
    (("npm_",), r"npm_[A-Za-z0-9]{30,}"),
    (("pypi-ageichlwas5vcmc",), r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{20,}"),
    (("rubygems_",), r"rubygems_[a-f0-9]{40,}"),
    (("dckr_pat_",), r"dckr_pat_[A-Za-z0-9_-]{20,}"),
    (("atlasv1",), r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{40,}"),
    (("pul-",), r"pul-[a-f0-9]{40}"),
    (("hvs.", "hvb.", "hvr."), r"hv[sbr]\.[A-Za-z0-9_-]{20,}"),
    (("dp.",), r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{30,}"),
    (("dapi",), r"dapi[a-f0-9]{32}(?:-\d)?"),
    (("doo_v1_", "dop_v1_", "dor_v1_"), r"do[opr]_v1_[a-f0-9]{64}"),
    (("hrku-",), r"HRKU-AA[0-9A-Za-z_-]{50,}"),
    (("fo1_",), r"fo1_[A-Za-z0-9_-]{40,}"),
    (("vcp_", "vck_", "vci_", "vcr_", "vca_"), r"vc[pkira]_[A-Za-z0-9]{40,}"),
    (("nfp_", "nfc_"), r"nf[pc]_[A-Za-z0-9]{30,}"),
    (("glsa_",), r"glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}"),
    (("glc_",), r"glc_[A-Za-z0-9+/]{32,}={0,3}"),
    (("sntryu_", "sntrys_"), r"sntry[us]_[A-Za-z0-9+/=_]{40,}"),
    (("nrak-", "nrii-", "nrjs-", "nraa-"), r"NR(?:AK|II|JS|AA)-[A-Za-z0-9]{20,}"),
    (("pmak-",), r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}"),
    (("lin_api_", "lin_oauth_"), r"lin_(?:api|oauth)_[A-Za-z0-9]{40}"),
    (("ntn_",), r"ntn_[0-9]{11}[A-Za-z0-9]{32,}"),
    (("shpat_", "shpca_", "shppa_", "shpss_"), r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"),
    (("pscale_",), r"pscale_(?:tkn|oauth|pw)_[A-Za-z0-9_=.-]{32,64}"),
    (("pnu_",), r"pnu_[A-Za-z0-9]{36}"),
    (("rdme_",), r"rdme_[a-z0-9]{70}"),
    (("age-secret-key-1",), r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}"),
    (("ops_eyj",), r"ops_eyJ[A-Za-z0-9+/]{100,}={0,3}"),
    (
        ("xoxa-", "xoxb-", "xoxp-", "xoxo-", "xoxs-", "xoxr-", "xoxe-"),
        r"xox[abposre]-[A-Za-z0-9-]{10,}",
    ),
    (("xapp-",), r"xapp-\d-[A-Za-z0-9]+-\d+-[A-Za-z0-9]+"),
    (
        ("sk_live_", "sk_test_", "sk_prod_", "rk_live_", "rk_test_", "rk_prod_"),
        r"[sr]k_(?:live|test|prod)_[A-Za-z0-9]{10,}",
    ),
    (("whsec_",), r"whsec_[A-Za-z0-9+/=]{24,}"),
    (("sk",), r"SK(?<![A-Za-z0-9]SK)[0-9a-fA-F]{32}(?![A-Za-z0-9])"),
    (("sg.",), r"SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"),
    (("xkeysib-",), r"xkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16}"),
    (("key-",), r"key-(?<![A-Za-z0-9]key-)[a-f0-9]{32}(?![A-Za-z0-9])"),
    (("eaaa",), r"EAAA(?<![A-Za-z0-9]EAAA)[A-Za-z0-9_-]{22,60}"),
    (("sq0atp-", "sq0csp-"), r"sq0(?:atp|csp)-[A-Za-z0-9_-]{22,}"),
    (("shippo_",), r"shippo_(?:live|test)_[a-fA-F0-9]{40}"),
    (("duffel_",), r"duffel_(?:live|test)_[A-Za-z0-9_=-]{40,}"),
    (
        ("sk-ant-", "sk-proj-", "sk-svcacct-", "sk-admin-", "sk-or-"),
        r"sk-(?:ant-(?:api|admin|sid|oat|ort)\d\d-|proj-|svcacct-|admin-|or-v1-)[A-Za-z0-9_-]{16,}",
    ),
    (("sk-",), r"sk-(?<![A-Za-z0-9-]sk-)[A-Za-z0-9_-]{20,}"),
    (("t3blbkfj",), r"T3BlbkFJ[A-Za-z0-9_-]{16,}"),
    (("gsk_",), r"gsk_[A-Za-z0-9]{40,}"),
    (("pplx-",), r"pplx-[A-Za-z0-9]{40,}"),
    (("xai-",), r"xai-[A-Za-z0-9]{60,}"),
    (("r8_",), r"r8_(?<![A-Za-z0-9]r8_)[A-Za-z0-9]{30,}"),
    (("fw_",), r"fw_(?<![A-Za-z0-9]fw_)[A-Za-z0-9]{20,}"),
    (("lsv2_",), r"lsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}"),
    (("pcsk_",), r"pcsk_[A-Za-z0-9_]{40,}"),
    (("hf_",), r"hf_[A-Za-z0-9]{20,}"),
    (("api_org_",), r"api_org_[A-Za-z]{30,}"),
    (("csk-",), r"csk-(?<![A-Za-z0-9]csk-)[a-z0-9]{40,}"),
    (("sk_",), r"sk_(?<![A-Za-z0-9]sk_)[a-f0-9]{40,}"),
    (("secret_",), r"secret_(?<![A-Za-z0-9]secret_)[A-Za-z0-9]{43}(?![A-Za-z0-9])"),
    (("eyjrijoi",), r"eyJrIjoi[A-Za-z0-9]{70,400}={0,3}"),
)

_HEADER_NAMES = (
    r"authorization|proxy-authorization|x-api-key|api-key|apikey|x-goog-api-key|"
    r"x-auth-token|anthropic-api-key|openai-api-key|x-amz-security-token|"
    r"private-token|ocp-apim-subscription-key|x-vault-token|x-access-token"
)
_SCHEMES = r"bearer|basic|token|digest|negotiate|sso-key|apikey|key|otp"
# Words whose presence at the end of a key name may make its value a secret; `_secret_key`
# decides (the pattern only finds candidates). `key` alone is too common a word: a key named
# only `key` is no secret's name, and `cache_key` holds one only when its value is random.
_WORDS = (
    r"password|passwd|passphrase|pass|pwd|pw|secrets?|token|pat|credentials?|key|auth|"
    r"authorization|signature|sig|cookie|session"
)
_NEUTRAL = r"base|value|val|data|b64|base64|raw|str|string|plain|hex|enc|encoded|text"
_VALUE_END = r"(?:[^\s\"'`&<>,;(){}\[\]\\]|\\u[0-9a-fA-F]{4})"


# --- what makes a key name a secret's name, and a value a secret ----------------------------

_PASSWORDISH = frozenset(
    {"password", "passwd", "passphrase", "pass", "pwd", "pw", "secret", "secrets"}
)
_TOKENISH = frozenset(
    {
        "token",
        "credential",
        "credentials",
        "auth",
        "authorization",
        "signature",
        "sig",
        "cookie",
        "session",
        "bearer",
        "apikey",
        "pat",
    }
)
# A `key` after one of these words names a secret (`api_key`, `SecretAccessKey`).
_KEY_HEADS = frozenset(
    {
        "api",
        "access",
        "secret",
        "private",
        "account",
        "signing",
        "encryption",
        "master",
        "client",
        "app",
        "consumer",
        "license",
        "subscription",
        "shared",
        "auth",
        "webhook",
        "service",
        "storage",
        "encrypt",
        "hmac",
        "crypto",
        "admin",
        "deploy",
        "ssh",
        "gpg",
        "pgp",
        "rsa",
        "root",
        "session",
        "cookie",
        "jwt",
        "write",
        "read",
        "ingest",
        "sdk",
        "mgmt",
        "management",
        "bot",
        "user",
        "server",
        "developer",
        "publishable",
        "live",
        "test",
    }
)
# Glued words (`PGPASSWORD`, `accesstoken`, `apikey`) end with one of these.
_GLUED = (
    ("password", "password"),
    ("passwd", "password"),
    ("passphrase", "password"),
    ("secret", "password"),
    ("token", "token"),
    ("apikey", "password"),
    ("accesskey", "password"),
    ("secretkey", "password"),
    ("privatekey", "password"),
    ("accountkey", "password"),
    ("signingkey", "password"),
    ("masterkey", "password"),
    ("authkey", "password"),
    ("credential", "token"),
    ("credentials", "token"),
    ("signature", "token"),
    ("authorization", "token"),
)
_NEUTRAL_WORDS = frozenset(_NEUTRAL.split("|"))
_KEY_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+", _FLAGS)


def _secret_key(key: str) -> str | None:
    """What a key name says of its value: "password" (any value is a secret), "token" (a
    value that is not a plain word is), "key" (a random-looking value is), or None."""
    lowered = key.lower()
    if "csrf" in lowered or "xsrf" in lowered:  # a page's own anti-forgery token, in its forms
        return None
    words = [w.lower() for w in _KEY_WORD.findall(key)]
    while len(words) > 1 and words[-1] in _NEUTRAL_WORDS:
        words.pop()
    if not words:
        return None
    last = words[-1]
    if last in _PASSWORDISH:
        return "password"
    if last in _TOKENISH:
        return "token"
    if last == "key" and len(words) > 1:  # `api_key`, `SecretAccessKey`: any value
        return "password" if words[-2] in _KEY_HEADS else "key"
    for ending, kind in _GLUED:
        if last.endswith(ending):
            return kind
    return None


_KEYWORDS = frozenset(
    {
        "true",
        "false",
        "null",
        "none",
        "nil",
        "undefined",
        "self",
        "this",
        "required",
        "optional",
        "string",
        "str",
        "bool",
        "int",
        "secret",
        "password",
        "token",
        "env",
    }
)
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*", _FLAGS)
# Values that stand for a secret without being one: `$PASSWORD`, `${X}`, `<token>`, `{{ x }}`,
# `%(password)s`, `***`, `...`, `xxxx`, a digest reference (`blake3:...`).
_PLACEHOLDER = re.compile(
    r"\$|<[^>]*>$|\{\{|%\(|%s$|\*+$|\.\.\.|\u2026+$|[xX]{4,}$|0x[0-9a-fA-F]+$|"
    r"(?:sha256|sha1|sha512|md5|blake3):",
    _FLAGS,
)
_FORMATTING = re.compile(r"%s|%\(|\{\}|\{[0-9]\}|\{\{", _FLAGS)
_CAPS = re.compile(r"[A-Z][A-Z_]*", _FLAGS)


def _entropy(value: str) -> float:
    counts: dict[str, int] = {}
    for char in value:
        counts[char] = counts.get(char, 0) + 1
    size = len(value)
    return -sum(n / size * math.log2(n / size) for n in counts.values())


_UUID = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}", _FLAGS
)


def _random_looking(value: str) -> bool:
    """A long random token: 16+ characters, letters and digits, no path or UUID, high entropy."""
    if (
        len(value) < 16
        or value.startswith(("/", ".", "-"))
        or "//" in value
        or _UUID.fullmatch(value)
    ):
        return False
    if not any(c.isdigit() for c in value) or not any(c.isalpha() for c in value):
        return False
    return _entropy(value) >= (3.0 if len(value) < 24 else 3.4)


_CAMEL = re.compile(r"[A-Za-z][a-z]+(?:[A-Z][a-z]+)*", _FLAGS)


def _not_a_word(value: str) -> bool:
    """Not a plain word or identifier: a digit, a base64 sign, irregular mixed case, or long."""
    if any(c.isdigit() for c in value) or any(c in "+/=" for c in value) or len(value) >= 24:
        return True
    mixed = any(c.isupper() for c in value[1:]) and any(c.islower() for c in value)
    return mixed and _CAMEL.fullmatch(value) is None


def _placeholder(value: str) -> bool:
    stripped = value.strip()
    return (
        not stripped.strip("\"'`\\")  # nothing but quotes (shell quoting: '"'"')
        or _PLACEHOLDER.match(stripped) is not None
        or _FORMATTING.search(stripped) is not None
        or stripped.lower() in _KEYWORDS
        or (_CAPS.fullmatch(stripped) is not None and len(stripped) <= 32)
    )


def _value_is_secret(kind: str | None, value: str, *, quoted: bool, code: bool = False) -> bool:
    if kind is None or _placeholder(value):
        return False
    if kind == "key":
        return _random_looking(value)
    if code:
        return False
    if kind == "password":
        return True
    # A token, signature, cookie...: never a plain word, and quoted, never prose.
    return _not_a_word(value) and not (quoted and any(c.isspace() for c in value.strip()))


_PROSE_AFTER = re.compile(r"[ \t]+[A-Za-z]", _FLAGS)


def _bare_value_is_secret(kind: str, key: str, sep: str, match: re.Match[str]) -> bool:
    value, text = match["v"], match.string
    following = text[match.end() : match.end() + 1]
    # Code, not a value: `password = getpass()`, `self.password = password`, `x = y = ''`.
    code = _IDENTIFIER.fullmatch(value) is not None and (
        following in ("(", "[")
        or "." in value
        or (sep.strip() in ("=", ":=") and sep.startswith(" ") and not value[-1:].isdigit())
        or value.lower() in key.lower()
    )
    # Prose, not a value: "password: expected bytes, got str", "secrets: 576 of 5 tabs".
    if ":" in sep and not code and (value.isalpha() or value.isdigit()):
        code = _PROSE_AFTER.match(text, match.end()) is not None
    return _value_is_secret(kind, value, quoted=False, code=code)


def _userinfo_password(match: re.Match[str]) -> bool:
    return not _placeholder(match["v"]) and match["v"].lower() not in ("pass", "pw", "pwd")


def _named_field(match: re.Match[str]) -> bool:
    return _value_is_secret(_secret_key(match["k"]), match["v"], quoted=True)


def _argv_option(match: re.Match[str]) -> bool:
    value = match["v"]
    return not value.startswith("-") and _value_is_secret(
        _secret_key(match["k"]), value, quoted=True
    )


def _at_edge(text: str, at: int) -> bool:
    """Whether a name or token starting at `at` is not inside a word (right after a JSON
    escape, `\\n` or `\\t`, it is not)."""
    if at == 0:
        return True
    before = text[at - 1]
    if not (before.isascii() and before.isalnum()):
        return True
    return at >= 2 and text[at - 2] == "\\" and before in "nrtfb"


def _header(match: re.Match[str]) -> bool:
    if not _at_edge(match.string, match.start()):
        return False
    value = match["v"].strip()
    if _placeholder(value):
        return False
    if "cookie" in match["k"].lower():
        return "=" in value
    first = value.split()[0] if value.split() else ""
    return len(first) >= 8 and (_not_a_word(first) or len(first) >= 16)


def _scheme_token(match: re.Match[str]) -> bool:
    value, scheme = match["v"], match["s"].lower()
    if not _at_edge(match.string, match.start()) or _placeholder(value):
        return False
    if scheme == "basic":  # base64 of user:password
        return len(value) % 4 == 0 and _not_a_word(value)
    if scheme == "token":
        return len(value) >= 16 and any(c.isdigit() for c in value)
    return _not_a_word(value) and any(c.isdigit() for c in value)


def _entropy_token(match: re.Match[str]) -> bool:
    return _at_edge(match.string, match.start()) and _random_looking(match["v"].rstrip("."))


def _userinfo_user(match: re.Match[str]) -> bool:
    return any(c.isdigit() for c in match["v"])


_SECRET_WORD_TRIGGERS = (
    "pass",
    "pwd",
    "pw",
    "secret",
    "token",
    "pat",
    "key",
    "auth",
    "credential",
    "sig",
    "cookie",
    "session",
)
_KEYED = re.compile(
    rf"(?:{_WORDS})(?:[_.-]?(?:{_NEUTRAL}))?(?![a-z0-9_-]){_QUOTE}?\]?\s*(?::=|=>|[:=,])", _FLAGS
)


class _Found:
    """A match over the lowered text, read from the original text (same places)."""

    __slots__ = ("match", "string")

    def __init__(self, match: re.Match[str], text: str):
        self.match, self.string = match, text

    def __getitem__(self, group):
        start, end = self.match.span(group)
        return None if start < 0 else self.string[start:end]

    def start(self, group=0) -> int:
        return self.match.start(group)

    def end(self, group=0) -> int:
        return self.match.end(group)

    def span(self, group=0) -> tuple[int, int]:
        return self.match.span(group)


class Rule:
    """One way a credential appears: its pattern, the group holding the secret (`v`), the
    trigger words without which it cannot match, a prefilter (a necessary condition on the
    lowered text) and a check of each match. A rule with a `finder` finds its spans itself.
    `starts`: where in the lowered text a match can start (a function of it, giving every such
    place in order, and maybe others), for a pattern that a search tries slowly at every
    place: its matches are those of `finditer`, found by trying these places only
    (`_matches_at`)."""

    __slots__ = (
        "kind",
        "pattern",
        "lowered",
        "triggers",
        "prefilter",
        "check",
        "finder",
        "value",
        "starts",
    )

    def __init__(
        self,
        kind,
        pattern,
        triggers,
        prefilter=None,
        check=None,
        flags=_I,
        finder=None,
        starts=None,
    ):
        self.kind = kind
        self.pattern = re.compile(pattern, flags) if isinstance(pattern, str) else pattern
        # A case-insensitive pattern runs case-sensitively over the lowered text (several
        # times faster), when lowering kept every character in its place.
        self.lowered = (
            re.compile(pattern, flags & ~re.IGNORECASE)
            if isinstance(pattern, str) and flags & re.IGNORECASE
            else None
        )
        self.triggers = frozenset(triggers)
        self.prefilter = prefilter
        self.check = check
        self.finder = finder
        self.value = self.pattern is not None and "v" in self.pattern.groupindex
        self.starts = starts


def _matches_at(pattern: re.Pattern[str], text: str, starts):
    """`pattern.finditer(text)`, trying only the places `starts` gives (in order; every place
    a match can start among them): each match is the first at or after the end of the one
    before, as a search finds it (`match` at a place sees the text before it, as a search
    does: lookbehinds, `\\b`, `^`)."""
    end = 0
    for start in starts:
        if start >= end:
            match = pattern.match(text, start)
            if match is not None:
                yield match
                end = match.end()


# Places are given a block of the text at a time (as few in memory as a block holds): a text
# of one character repeated holds a place at every character.
PLACES_BLOCK = 16384


def _places_of(text: str, *literals: str) -> Iterator[int]:
    """Every place where one of `literals` starts in `text`, in order, each once."""
    if len(literals) == 1:
        literal = literals[0]
        at = text.find(literal)
        while at >= 0:
            yield at
            at = text.find(literal, at + 1)
        return
    following = [text.find(literal) for literal in literals]  # each one's next place
    for block in range(0, len(text), PLACES_BLOCK):
        stop = block + PLACES_BLOCK
        found: set[int] = set()
        for i, literal in enumerate(literals):
            at = following[i]
            while 0 <= at < stop:
                found.add(at)
                at = text.find(literal, at + 1)
            following[i] = at
        yield from sorted(found)


_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789+.-")
_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyz")
_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_")


def _scheme_starts(lowered: str) -> Iterator[int]:
    """Where `\\b[a-z][a-z0-9+.-]{1,20}://` can start (in lowered text): 2 to 21 characters
    before a `://`, in the scheme characters right before it, at a letter after no letter,
    digit or `_`."""
    last = -1
    for at in _places_of(lowered, "://"):
        start = at
        while start > max(0, at - 21) and lowered[start - 1] in _SCHEME_CHARS:
            start -= 1
        for place in range(max(start, last + 1), at - 1):
            last = place
            if lowered[place] in _LETTERS and (place == 0 or lowered[place - 1] not in _WORD_CHARS):
                yield place


def _header_starts(lowered: str) -> Iterator[int]:
    """Where `(?P<k>{_HEADER_NAMES})` can start: at a header's name."""
    return _places_of(lowered, *_HEADER_NAMES.split("|"))


_OPTION_START = re.compile(r"(?<![a-z0-9-])-", _FLAGS)


def _option_starts(lowered: str) -> Iterator[int]:
    """Where `(?<![A-Za-z0-9-])--?` can start (in lowered text): at a `-` after none of
    those."""
    return (match.start() for match in _OPTION_START.finditer(lowered))


def _scheme_word_starts(lowered: str) -> Iterator[int]:
    """Where `(?P<s>bearer|basic|token)` can start."""
    return _places_of(lowered, "bearer", "basic", "token")


def _fetcher_starts(lowered: str) -> Iterator[int]:
    """Where `\\b(?:curl|wget|http)\\b` can start."""
    return _places_of(lowered, "curl", "wget", "http")


def _secret_word_starts(lowered: str) -> Iterator[int]:
    """Where `(?:secrets?|tokens?|keys?|passwords?|passwd|pwd|credentials?|apikey|passphrase|
    bearer)` can start."""
    return _places_of(
        lowered, "secret", "token", "key", "pass", "pwd", "credential", "apikey", "bearer"
    )


class _SearchAt:
    """A prefilter's search (the first match, or None), trying only the places `starts` gives
    (as for `Rule.starts`)."""

    __slots__ = ("pattern", "starts")

    def __init__(self, pattern: re.Pattern[str], starts):
        self.pattern, self.starts = pattern, starts

    def search(self, text: str) -> re.Match[str] | None:
        return next(_matches_at(self.pattern, text, self.starts(text)), None)


def _line_starts(lowered: str) -> Iterator[int]:
    """Where `(?:^|(?<=\\n)|(?<=\\\\n))[ \\t]*(?:password|passwd)` can start: before the
    spaces and tabs before a `passw` (after a space or a tab, none of the three holds)."""
    for at in _places_of(lowered, "passw"):
        while at and lowered[at - 1] in " \t":
            at -= 1
        yield at


# Known tokens and JWTs are runs of token characters, 16 and more long: they are looked for
# only in those runs (joined, a small part of most texts), not in the whole text.
_RUN = re.compile(r"[A-Za-z0-9_+/=.~-]{16,}", _FLAGS)
_TOKEN_RULES = tuple(
    Rule("api-key", pattern, triggers, flags=_FLAGS) for triggers, pattern in TOKENS
) + (
    Rule(
        "jwt",
        # At the start of a segment only: from every `eyJ` of one long run, the scan for the
        # dot would read the run again.
        r"eyJ(?<![A-Za-z0-9_-]eyJ)[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
        ("eyj",),
        flags=_FLAGS,
    ),
)
_TOKEN_TRIGGERS = tuple(sorted({t for rule in _TOKEN_RULES for t in rule.triggers}))
_TOKEN_TRIGGER_CHARS = frozenset("".join(_TOKEN_TRIGGERS))
GLUED_CHARS = 128
_INNER = next(rule.triggers for rule in _TOKEN_RULES if "t3blbkfj" in rule.triggers)
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_TRIGGER_PAIRS: dict[str, tuple[str, ...]] = {}
for _trigger in _TOKEN_TRIGGERS:
    _TRIGGER_PAIRS[_trigger[:2]] = (*_TRIGGER_PAIRS.get(_trigger[:2], ()), _trigger)


def _absent_chars(text: str, chars: frozenset[str]) -> frozenset[str]:
    """Those of `chars` that `text` lacks: a trigger holding one cannot be in it. One memchr
    per character (stopping at its first place) where `trigger in text` read a long text once
    per trigger: a 10 MB body of few distinct characters took a second for the 119 triggers."""
    return frozenset(c for c in chars if c not in text)


# Known tokens found in each run of token characters met lately, by run (a run's tokens
# depend on the run alone: no token pattern matches the NUL that joins the runs, nor looks
# past it, and each rule's trigger is in every token it matches, so it is found in the runs
# it is in). A page repeats its ids, hashes and links in every view of it, and the decoded
# reading of a text repeats the runs of the text: the viewer crawl's 255,000 runs are 7,600
# distinct ones. Runs of up to RUN_MEMO_CHARS characters, at most RUN_MEMO_ENTRIES of them
# (then the memo starts again).
RUN_MEMO_CHARS = 256
RUN_MEMO_ENTRIES = 8192
_run_memo: dict[bool, dict[str, tuple[tuple[int, int, str], ...]]] = {True: {}, False: {}}
_RUN_SPLIT = re.compile(f"({_RUN.pattern})", _FLAGS)


def _runs_tokens(parts: list[str], filtered: bool) -> list[list[tuple[int, int, str]]]:
    """The known tokens of each run, as spans of the run: each rule runs over the joined runs
    when its trigger is in them."""
    found_in: list[list[tuple[int, int, str]]] = [[] for _ in parts]
    starts: list[int] = []
    length = 0
    for part in parts:
        starts.append(length)
        length += len(part) + 1
    runs = "\x00".join(parts)
    lowered = runs.lower()
    if len(lowered) <= SHORT_TEXT:  # the triggers that start with a pair of letters it has
        pairs = {lowered[i : i + 2] for i in range(len(lowered) - 1)} & _TRIGGER_PAIRS.keys()
        found = {t for pair in pairs for t in _TRIGGER_PAIRS[pair] if t in lowered}
    else:
        absent = _absent_chars(lowered, _TOKEN_TRIGGER_CHARS)
        found = {t for t in _TOKEN_TRIGGERS if absent.isdisjoint(t) and t in lowered}
    if filtered and not found:
        return found_in
    for rule in _TOKEN_RULES:
        if filtered and rule.triggers.isdisjoint(found):
            continue
        floor, inner = 0, rule.triggers is _INNER
        for match in rule.pattern.finditer(runs):
            start, end = match.span()
            # `T3BlbkFJ` sits inside an OpenAI key: the key's head goes with it, up to
            # `GLUED_CHARS` back and never into the token before.
            limit = max(floor, start - GLUED_CHARS) if inner else start
            while start > limit and runs[start - 1] in _TOKEN_CHARS:
                start -= 1
            floor = end
            i = bisect.bisect_right(starts, start) - 1
            found_in[i].append((start - starts[i], end - starts[i], rule.kind))
    return found_in


def _token_spans(text: str, _lowered: str | None, *, filtered: bool = True):
    """Spans of known tokens: those of each run of token characters (`_runs_tokens`), looked
    for once per distinct run (`_run_memo`)."""
    pieces = _RUN_SPLIT.split(text)  # between runs, a run, between runs, ...
    if len(pieces) == 1:
        return
    parts = pieces[1::2]
    memo = _run_memo[filtered]
    hits: list[tuple[int, tuple[tuple[int, int, str], ...]]] = []
    new: list[int] = []
    for i, part in enumerate(parts):
        found = memo.get(part)
        if found is None:
            new.append(i)
        elif found:
            hits.append((i, found))
    if new:
        if len(memo) + len(new) > RUN_MEMO_ENTRIES:
            memo.clear()
        for i, found in zip(new, _runs_tokens([parts[i] for i in new], filtered), strict=True):
            kept = tuple(found)
            if kept:
                hits.append((i, kept))
            if len(parts[i]) <= RUN_MEMO_CHARS and len(memo) < RUN_MEMO_ENTRIES:
                memo[parts[i]] = kept
    if not hits:
        return
    ends = list(itertools.accumulate(map(len, pieces)))
    for i, found in hits:
        origin = ends[2 * i]
        for start, end, kind in found:
            yield start + origin, end + origin, kind


# A secret word ending a key name, then `:`, `=`, `:=` or `=>`: where a keyed value may start.
_KEY_ANCHOR = re.compile(
    rf"(?:{_WORDS})(?:[_.-]?(?:{_NEUTRAL}))?(?![A-Za-z0-9_-])"
    rf"(?P<sep>{_QUOTE}?\]?\s*(?::=|=>|[:=])\s*)",
    _I,
)
_QUOTED_VALUE = re.compile(
    rf"(?P<q>{_QUOTE}){_NOT_REDACTED}(?P<v>(?:(?!(?P=q))[^\r\n]){{1,4096}}?)(?=(?P=q))", _FLAGS
)
_BARE_VALUE = re.compile(
    rf"{_NOT_REDACTED}(?!{_QUOTE}|[{{\[(])(?P<v>{_VALUE_END}{{3,4096}})", _FLAGS
)
_KEY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
KEY_MAX_CHARS = 60


def _key_start(text: str, end: int) -> int | None:
    """Where the key name ending near `end` starts: the identifier characters before it, but
    not the letter of a JSON escape (`\nPASSWORD=`); None past `KEY_MAX_CHARS`."""
    start = end
    while start > 0 and text[start - 1] in _KEY_CHARS:
        if start >= 2 and text[start - 2] == "\\" and text[start - 1] in "nrtfb":
            break
        start -= 1
        if end - start > KEY_MAX_CHARS:
            return None
    return start


_KEY_ANCHOR_LOWERED = re.compile(_KEY_ANCHOR.pattern, _FLAGS)


def _keyed_spans(text: str, lowered: str | None, *, filtered: bool = True):
    """`"password": "p@ss word"`, `DB_PASS='x'`, `{\\"token\\": \\"...\\"}` (a quoted value,
    whole) and `password=hunter2`, `KEY: value`, `sig=abc&...` (an unquoted value, to a
    delimiter), for a key named as `_secret_key` says."""
    if lowered is not None:
        anchors = (_Found(m, text) for m in _KEY_ANCHOR_LOWERED.finditer(lowered))
    else:
        anchors = _KEY_ANCHOR.finditer(text)
    covered = 0  # the end of the last value masked: a key inside it is part of the secret
    for match in anchors:
        if match.start() < covered:
            continue
        start = _key_start(text, match.start())
        if start is None:
            continue
        key = text[start : match.start("sep")]
        kind = _secret_key(key)
        if kind is None:
            continue
        sep, at = match["sep"], match.end()
        quoted = _QUOTED_VALUE.match(text, at)
        if quoted is not None:
            if _value_is_secret(kind, quoted["v"], quoted=True):
                covered = quoted.end("v")
                yield (*quoted.span("v"), "secret-field")
            continue
        if "\n" in sep or "\r" in sep:
            continue
        bare = _BARE_VALUE.match(text, at)
        if bare is not None and _bare_value_is_secret(kind, key, sep, bare):
            covered = bare.end("v")
            yield (*bare.span("v"), "secret-value")


# `(?:{_WORDS})>` as a search finds it (the same texts), from each `>` back: a search for a
# literal, where the alternation of words was tried at every letter that starts one.
_WORD_LIST = [
    spelt
    for word in _WORDS.split("|")
    for spelt in ((word[:-2], word[:-2] + "s") if word.endswith("s?") else (word,))
]
_WORD_THEN_GT = re.compile(">(?:" + "|".join(f"(?<={w}>)" for w in _WORD_LIST) + ")", _FLAGS)


RULES: tuple[Rule, ...] = (
    Rule(
        "private-key",
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?P<v>[\s\S]*?)"
        r"(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|$)",
        ("private key",),
        flags=_FLAGS,
    ),
    Rule("api-key", None, (), finder=_token_spans),
    Rule("secret-value", None, _SECRET_WORD_TRIGGERS, _KEYED, finder=_keyed_spans),
    Rule(
        "api-key",
        r"(?<![0-9])[0-9]{8,10}:AA[A-Za-z0-9_-]{30,}",
        (":aa",),
        flags=_FLAGS,
    ),
    # scheme://user:password@host, with an empty user or an `@` in the password too: the
    # password goes, the user and host stay.
    Rule(
        "userinfo",
        rf"\b[a-z][a-z0-9+.-]{{1,20}}://[^\s/:@\"'<>\\\[\]]{{0,256}}:{_NOT_REDACTED}"
        r"(?P<v>[^\s/\"'<>\\]{1,256})@"
        r"(?=[A-Za-z0-9\[])",
        ("://",),
        check=_userinfo_password,
        starts=_scheme_starts,
    ),
    Rule(
        "userinfo",
        r"\b[a-z][a-z0-9+.-]{1,20}://(?P<v>[A-Za-z0-9_.~-]{16,256})@(?=[A-Za-z0-9\[])",
        ("://",),
        check=_userinfo_user,
        starts=_scheme_starts,
    ),
    Rule(
        "webhook",
        r"(?:hooks\.slack\.com/(?:services|workflows|triggers)/|discord(?:app)?\.com/api/webhooks/"
        r"|\.webhook\.office\.com/webhookb2/)(?P<v>[A-Za-z0-9/@_-]{8,})",
        ("hooks.slack.com", "/api/webhooks/", "webhook.office.com"),
    ),
    # "authorization: Bearer abc" header lines and "x-api-key": "abc" fields.
    Rule(
        "header",
        rf"(?P<k>{_HEADER_NAMES})(?:{_QUOTE}?\s*[:=]\s*{_QUOTE}?){_NOT_REDACTED}"
        rf"(?:(?:{_SCHEMES})\s+)?{_NOT_REDACTED}(?P<v>[^\s\"'&<,}}\\]{{4,}})",
        ("authorization", "api-key", "apikey", "-token", "subscription-key"),
        check=_header,
        starts=_header_starts,
    ),
    # A cookie header: every value on the line.
    Rule(
        "header",
        rf"(?P<k>(?:set-)?cookie)(?:{_QUOTE}?\s*:\s*{_QUOTE}?){_NOT_REDACTED}"
        rf"(?P<v>[^\r\n\"&<,}}\\]{{4,}})",
        ("cookie",),
        check=_header,
    ),
    Rule(
        "bearer",
        rf"(?P<s>bearer|basic|token)\s+{_NOT_REDACTED}(?P<v>[A-Za-z0-9._~+/=-]{{8,}})",
        ("bearer", "basic", "token"),
        _SearchAt(
            re.compile(r"(?:bearer|basic|token)\s+[a-z0-9._~+/=-]{8}", _FLAGS), _scheme_word_starts
        ),
        _scheme_token,
        starts=_scheme_word_starts,
    ),
    # <password>x</password>, <add key="Password" value="x"/>, <input type="password" value=x>,
    # {"name": "DB_PASSWORD", "value": "x"}, `- name: X_TOKEN\n  value: x`.
    Rule(
        "secret-field",
        rf"<(?P<k>[A-Za-z0-9_:.-]{{0,60}}(?:{_WORDS}))>{_NOT_REDACTED}(?P<v>[^<]{{1,1024}})</",
        _SECRET_WORD_TRIGGERS,
        _WORD_THEN_GT,
        _named_field,
    ),
    Rule(
        "secret-field",
        rf"\b(?:name|key|id|type|property)\s*=\s*{_QUOTE}(?P<k>[A-Za-z0-9_.:-]{{1,64}}){_QUOTE}"
        rf"[^<>]{{0,200}}?\bvalue\s*=\s*(?P<q>{_QUOTE})(?P<v>(?:(?!(?P=q))[^\r\n<>]){{1,1024}}?)"
        r"(?=(?P=q))",
        ("value",),
        re.compile(r"value\s*=", _FLAGS),
        _named_field,
    ),
    Rule(
        "secret-field",
        rf"{_QUOTE}(?:name|key)\s*{_QUOTE}\s*:\s*{_QUOTE}(?P<k>[A-Za-z0-9_.:-]{{1,128}}){_QUOTE}"
        rf"\s*,\s*{_QUOTE}value{_QUOTE}\s*:\s*(?P<q>{_QUOTE})"
        r"(?P<v>(?:(?!(?P=q))[^\r\n]){1,4096}?)(?=(?P=q))",
        ("value",),
        re.compile(r"(?:name|key)[^:\n]{0,12}:[\s\S]{0,400}?value[^:\n]{0,12}:", _FLAGS),
        _named_field,
    ),
    Rule(
        "secret-value",
        r"\bname:\s*[\"']?(?P<k>[A-Za-z0-9_.-]{1,128})[\"']?\s*(?:\n|\\n)\s*value:\s*[\"']?"
        rf"{_NOT_REDACTED}(?P<v>{_VALUE_END}{{3,}})",
        ("value:",),
        check=_named_field,
    ),
    # define('DB_PASSWORD', 'x'), os.environ.setdefault("API_TOKEN", "x"), putenv(...).
    Rule(
        "secret-field",
        rf"\b(?:define|setenv|putenv|setdefault|set_env)\s*\(\s*{_QUOTE}"
        rf"(?P<k>[A-Za-z0-9_.-]{{1,128}}){_QUOTE}\s*,\s*(?P<q>{_QUOTE}){_NOT_REDACTED}"
        r"(?P<v>(?:(?!(?P=q))[^\r\n]){1,4096}?)(?=(?P=q))",
        ("define", "setenv", "putenv", "setdefault", "set_env"),
        check=_named_field,
    ),
    # argv: --password V, --api-key=V, -p V for the programs that take a password so.
    Rule(
        "argv",
        rf"(?<![A-Za-z0-9-])--?(?P<k>(?:[A-Za-z][A-Za-z0-9-]{{0,40}}?)?(?:{_WORDS}))(?:=|[ \t]+)"
        rf"{_QUOTE}?{_NOT_REDACTED}(?P<v>[^\s\"'`\\]{{3,}})",
        _SECRET_WORD_TRIGGERS,
        # As the pattern: a dash, at most one more and 41 name characters, the word. Unbounded
        # (`[a-z0-9-]*`), a search ran to the end of every run of dashes from each of its
        # dashes: 16 KB of `-` took 3 s to mask, 64 KB 50 s.
        re.compile(rf"-[a-z0-9-]{{0,42}}(?:{_WORDS})(?:=|[ \t])", _FLAGS),
        _argv_option,
        starts=_option_starts,
    ),
    Rule(
        "argv",
        r"\b(?:sshpass|docker|podman|nerdctl|buildah|skopeo|helm|oras|crane)\b[^\n;|&]{0,80}?"
        rf"\s-p[ \t]+{_QUOTE}?{_NOT_REDACTED}(?P<v>[^\s\"'`\\]{{3,}})",
        ("sshpass", "login"),
    ),
    Rule(
        "argv",
        r"\b(?:mysql|mysqldump|mysqladmin|mariadb|mariadb-dump|mysqlimport|mysqlshow)\b"
        rf"[^\n;|&]{{0,80}}?\s-p{_NOT_REDACTED}(?P<v>[^\s\"'`\\]{{3,}})",
        ("mysql", "mariadb"),
    ),
    Rule(
        "argv",
        r"\bredis-cli\b[^\n;|&]{0,80}?\s-a[ \t]+"
        rf"{_QUOTE}?{_NOT_REDACTED}(?P<v>[^\s\"'`\\]{{3,}})",
        ("redis-cli",),
    ),
    Rule(
        "argv",
        r"\b(?:curl|wget|http)\b[^\n;|&]{0,200}?\s(?:-u|--user|--http-password|--password)"
        rf"(?:=|[ \t]+){_QUOTE}?[^\s:\"'`\\]*:(?P<v>[^\s\"'`\\]{{3,}})",
        ("curl", "wget", "http"),
        re.compile(r"\s(?:-u|--user|--http-password|--password)(?:=|[ \t])", _FLAGS),
        starts=_fetcher_starts,
    ),
    # .netrc (`machine h login u password p`), .pgpass (`host:port:db:user:password`),
    # Netscape cookie jars (tab-separated, the value last).
    Rule(
        "dotfile",
        r"\b(?:login|user(?:name)?|account)[ \t]+[^\s,=:;]+\s+(?:password|passwd)[ \t]+"
        rf"{_NOT_REDACTED}(?P<v>[^\s\"'\\=:,;]{{3,}})",
        ("password", "passwd"),
    ),
    Rule(
        "dotfile",
        rf"(?:^|(?<=\n)|(?<=\\n))[ \t]*(?:password|passwd)[ \t]+{_NOT_REDACTED}"
        r"(?P<v>[^\s\"'\\]+)[ \t]*(?=$|\r|\n|\\n)",
        ("password", "passwd"),
        flags=_I | re.MULTILINE,
        starts=_line_starts,
    ),
    Rule(
        "dotfile",
        r"(?:^|(?<=[\n\"'\s=])|(?<=\\n))[A-Za-z0-9.*_-]+:(?:[0-9]{1,5}|\*):[A-Za-z0-9_*.-]+:"
        rf"[A-Za-z0-9_*.@-]+:{_NOT_REDACTED}(?P<v>[^\s\"'\\:]{{3,}})",
        (":",),
        re.compile(r":(?:[0-9]{1,5}|\*):[a-z0-9_*.-]+:[a-z0-9_*.@-]+:", _FLAGS),
        flags=_FLAGS | re.MULTILINE,
    ),
    Rule(
        "cookie-jar",
        r"(?:\t|\\t)(?:true|false)(?:\t|\\t)[^\t\n\\]*(?:\t|\\t)(?:true|false)(?:\t|\\t)[0-9]+"
        r"(?:\t|\\t)[^\t\n\\]+(?:\t|\\t)(?P<v>[^\t\r\n\\\"]+)",
        ("true", "false"),
        re.compile(r"(?:\t|\\t)(?:true|false)(?:\t|\\t)[0-9]+(?:\t|\\t)", _FLAGS),
    ),
    # A long random token right after a secret-ish word: "the secret is 7Gk2...".
    Rule(
        "entropy",
        r"(?:secrets?|tokens?|keys?|passwords?|passwd|pwd|credentials?|apikey|"
        r"passphrase|bearer)(?![A-Za-z0-9_-])(?:[\s:=,\"'`()\[\]-]|\b(?:is|was|are|to|for|the|"
        r"my|your|our|this|that|here|use|set|as|with|new|of|be|it|its|value|now|and)\b){1,10}"
        rf"{_NOT_REDACTED}(?P<v>[A-Za-z0-9+/=_.~-]{{16,}})",
        ("secret", "token", "key", "pass", "pwd", "credential", "bearer"),
        re.compile(
            r"(?:secrets?|tokens?|keys?|passwords?|passwd|pwd|credentials?|apikey|passphrase|"
            r"bearer)(?![a-z0-9_-])[\s\S]{1,60}?[a-z0-9+/=_.~-]{16}",
            _FLAGS,
        ),
        _entropy_token,
        starts=_secret_word_starts,
    ),
)


_RULE_TRIGGERS = tuple(sorted({t for rule in RULES for t in rule.triggers}))
_RULE_TRIGGER_CHARS = frozenset("".join(_RULE_TRIGGERS))
_PREFILTERS = tuple({id(r.prefilter): r.prefilter for r in RULES if r.prefilter}.values())
_PREFILTER_SLOT = {id(p): i for i, p in enumerate(_PREFILTERS)}


def _spans(text: str, lowered: str, *, filtered: bool = True) -> list[tuple[int, int, str]]:
    """(start, end, kind) of every credential value in `text` (`lowered` is text.lower())."""
    aligned = len(lowered) == len(text)  # lowering changed no character's place
    passed: list[bool | None] = [None] * len(_PREFILTERS)
    spans: list[tuple[int, int, str]] = []
    short = len(lowered) <= SHORT_TEXT
    # A short text is searched for every trigger at once, a large one only for the triggers
    # of the rules that get so far.
    present = {t for t in _RULE_TRIGGERS if t in lowered} if short else set()
    absent: dict[str, bool] = {}
    if not short:  # a trigger holding a character the text lacks is absent without a read
        lacks = _absent_chars(lowered, _RULE_TRIGGER_CHARS)
        absent.update((t, False) for t in _RULE_TRIGGERS if not lacks.isdisjoint(t))
    for rule in RULES:
        if rule.triggers and rule.triggers.isdisjoint(present):
            if short:
                continue
            for trigger in rule.triggers:
                if trigger not in absent:
                    if trigger in lowered:
                        present.add(trigger)
                        break
                    absent[trigger] = False
            else:
                continue
        if filtered and rule.prefilter is not None:
            slot = _PREFILTER_SLOT[id(rule.prefilter)]
            hit = passed[slot]
            if hit is None:
                hit = passed[slot] = rule.prefilter.search(lowered) is not None
            if not hit:
                continue
        if rule.finder is not None:
            spans.extend(rule.finder(text, lowered if aligned else None, filtered=filtered))
            continue
        check, kind, value = rule.check, rule.kind, rule.value
        if rule.lowered is not None and aligned:
            if rule.starts is not None:
                found = _matches_at(rule.lowered, lowered, rule.starts(lowered))
            else:
                found = rule.lowered.finditer(lowered)
            matches = (_Found(match, text) for match in found)
        else:
            matches = rule.pattern.finditer(text)
        for match in matches:
            if check is not None and not check(match):
                continue
            start, end = match.span("v") if value else match.span()
            if start < end:
                spans.append((start, end, kind))
    return spans


# --- the decode layer: the text a reader sees ------------------------------------------------

# Escapes that decode to an ASCII character (every pattern is ASCII): the decoded reading is
# looked at around them. An escaped non-ASCII character (`\u00e9`, `%C3%A9`) changes no
# match: a bare value takes JSON `\uXXXX` escapes in (`_VALUE_END`), a quoted one is whole.
_ESCAPED = re.compile(
    r"\\u00[0-7][0-9a-fA-F]|\\/|%[0-7][0-9a-fA-F]|"
    r"&(?:#0*(?:1[01][0-9]|12[0-7]|[0-9]{1,2});|#[xX]0*[0-7]?[0-9a-fA-F];|[A-Za-z][A-Za-z0-9]{1,31};)"
)
_ESCAPES = (
    r"\\u[0-9a-fA-F]{4}|\\[\\/\"'nrtbf]|%[0-9a-fA-F]{2}|"
    r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});"
)
_DECODE = re.compile(_ESCAPES + r"|\+")
_PERCENT = re.compile(r"%[0-9a-fA-F]{2}")
_SIMPLE_ESCAPES = {
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "b": "\b",
    "f": "\f",
    "/": "/",
    "\\": "\\",
    '"': '"',
    "'": "'",
}
DECODE_DEPTH = 3


# The pattern of `_DECODE` split around (a capturing group), with and without `+`: where `+`
# is no space, its every match was skipped, and no other escape starts with `+`.
_DECODE_SPLIT = {True: re.compile(f"({_DECODE.pattern})"), False: re.compile(f"({_ESCAPES})")}
# What each escape met lately reads as (itself when it is no escape after all: an escape
# never reads as itself, it is 2 or more characters that read as 1 or 2 others), up to this
# many escapes.
SHOWN_MEMO_ENTRIES = 4096
_shown_memo: dict[str, str] = {}


def _shown(token: str) -> str:
    """What one match of `_DECODE` reads as (itself when it is no escape after all)."""
    first = token[0]
    if first == "+":
        return " "
    if first == "\\":
        return chr(int(token[2:], 16)) if token[1] == "u" else _SIMPLE_ESCAPES[token[1]]
    if first == "%":
        return chr(int(token[1:], 16))
    if token[1] == "#":
        number = int(token[3:-1], 16) if token[2] in "xX" else int(token[2:-1])
        try:
            return chr(number)
        except (ValueError, OverflowError):
            return token
    return html5.get(token[1:], token)


def _decode_once(
    text: str, plus: bool | None = None
) -> tuple[str, list[tuple[int, int, int, int]]]:
    """`text` with one layer of JSON escapes, URL-encoding and HTML entities undone, and the
    replaced places: (decoded start, decoded end, original start, original end). `plus`:
    whether `+` reads as a space (None: when the text holds a percent-escape, form-encoded)."""
    if plus is None:
        plus = _PERCENT.search(text) is not None
    pieces = _DECODE_SPLIT[bool(plus)].split(text)  # text, escape, text, escape, ..., text
    if len(pieces) == 1:
        return text, []
    tokens = pieces[1::2]
    memo = _shown_memo
    shown = list(map(memo.get, tokens))
    if None in shown:  # escapes not met lately
        for i, token in enumerate(tokens):
            if shown[i] is None:
                shown[i] = _shown(token)
                if len(memo) < SHOWN_MEMO_ENTRIES:
                    memo[token] = shown[i]
    read = pieces.copy()
    read[1::2] = shown
    # Where each piece ends, in the text and in its reading: an escape's place is from the
    # end of the piece before it to its own end.
    original = list(itertools.accumulate(map(len, pieces)))
    decoded = list(itertools.accumulate(map(len, read)))
    places = list(zip(decoded[0::2], decoded[1::2], original[0::2], original[1::2], strict=False))
    if any(map(str.__eq__, shown, tokens)):  # some were no escape: no place
        places = [place for place, a, b in zip(places, shown, tokens, strict=True) if a != b]
    return "".join(read), places


def _back(places: list[tuple[int, int, int, int]], starts: list[int], start: int, end: int):
    """A span of a decoded text as the span of the text it was decoded from (an escape that a
    span touches is taken whole)."""

    def original(position: int) -> tuple[int, int]:
        """The span of the original text that decoded character `position` came from."""
        i = bisect.bisect_right(starts, position) - 1
        if i < 0:
            return position, position + 1
        _d_start, d_end, o_start, o_end = places[i]
        if position < d_end:
            return o_start, o_end
        moved = position + (o_end - d_end)
        return moved, moved + 1

    if end <= start:
        return original(start)[0], original(start)[0]
    return original(start)[0], original(end - 1)[1]


def decoded_reading(
    text: str, plus: bool | None = None
) -> tuple[str, list[list[tuple[int, int, int, int]]]] | None:
    """The text a reader sees (escapes undone up to `DECODE_DEPTH` deep) and the places of each
    layer, or None when `text` holds no escape. `plus`: as for `_decode_once`."""
    if _ESCAPED.search(text) is None:
        return None
    layers = []
    current = text
    for _ in range(DECODE_DEPTH):
        decoded, places = _decode_once(current, plus)
        if not places:
            break
        layers.append(places)
        current = decoded
        # `+` for a space is form-encoding's, undone with its own %-escapes: a `+` that layer
        # made (`%2B`) is a plus, so a deeper layer (JSON escapes beside it) keeps it, unless
        # %-escapes remain (encoded twice).
        plus = None if _PERCENT.search(current) else False
        if _ESCAPED.search(current) is None and "\\\\" not in current:
            break
    return (current, layers) if layers else None


def _to_original(layers, spans):
    found = []
    starts = [[p[0] for p in places] for places in layers]
    for start, end, kind in spans:
        for places, layer_starts in zip(reversed(layers), reversed(starts), strict=True):
            start, end = _back(places, layer_starts, start, end)
        found.append((start, end, kind))
    return found


def _apply(text: str, spans: list[tuple[int, int, str]]) -> str:
    if not spans:
        return text
    spans.sort()
    out: list[str] = []
    last = 0
    current_start, current_end, current_kind = spans[0]
    merged = []
    for start, end, kind in spans[1:]:
        if start <= current_end:
            current_end = max(current_end, end)
        else:
            merged.append((current_start, current_end, current_kind))
            current_start, current_end, current_kind = start, end, kind
    merged.append((current_start, current_end, current_kind))
    for start, end, kind in merged:
        out.append(text[last:start])
        out.append(f"[redacted:{kind}]")
        last = end
    out.append(text[last:])
    return "".join(out)


# The decoded reading is looked at around each escape, this far on either side (windows that
# meet are merged): a credential whose name, value or delimiter is escaped lies within it.
DECODE_WINDOW = 2048


def _decoded_spans(text: str, *, filtered: bool = True) -> list[tuple[int, int, str]]:
    """Spans found in the decoded reading of the parts of `text` around its escapes, as spans
    of `text`."""
    spans: list[tuple[int, int, str]] = []
    windows: list[list[int]] = []
    for match in _ESCAPED.finditer(text):
        start, end = max(0, match.start() - DECODE_WINDOW), match.end() + DECODE_WINDOW
        if windows and start <= windows[-1][1]:
            windows[-1][1] = end
        else:
            windows.append([start, end])
    for start, end in windows:
        chunk = text[start:end]
        # A window may hold form-encoded text (`+` a space) beside text where `+` is a token
        # character (base64 in another line): both readings are looked at.
        both = "+" in chunk and _PERCENT.search(chunk) is not None
        for plus in (True, False) if both else (None,):
            reading = decoded_reading(chunk, plus)
            if reading is None:
                continue
            decoded, layers = reading
            found = _spans(decoded, decoded.lower(), filtered=filtered)
            spans.extend((a + start, b + start, kind) for a, b, kind in _to_original(layers, found))
    return spans


# What any rule needs in a text: one of its triggers (the `.pgpass` rule's, `:`, is in every
# timestamp: its prefilter instead), a run of token characters (the known-token rules), or an
# escape (the decoded reading). A short text without any is returned as it is after one scan.
_PGPASS = next(rule for rule in RULES if rule.triggers == {":"})
_MAYBE = re.compile(
    "|".join(
        [re.escape(t) for t in sorted({t for r in RULES for t in r.triggers} - {":"}, key=len)]
        + [_PGPASS.prefilter.pattern, r"[a-z0-9_+/=.~-]{16}", _ESCAPED.pattern]
    ),
    _FLAGS,
)
SHORT_TEXT = 4096


def _mask(text: str, *, filtered: bool = True) -> str:
    lowered = text.lower()
    if filtered and len(text) <= SHORT_TEXT and _MAYBE.search(lowered) is None:
        return text
    spans = _spans(text, lowered, filtered=filtered)
    spans.extend(_decoded_spans(text, filtered=filtered))
    return _apply(text, spans)


# Answers for texts of up to MEMO_SHORT_CHARS characters, most recently used kept, within a
# budget of characters (texts and answers): the same cells are masked again on every view of a
# page, by every viewer (the viewer crawl's 426,000 calls were 97 % repeats). A pure function of
# its text, so a remembered answer is the answer.
MEMO_SHORT_CHARS = 16 * 1024
MEMO_TINY_CHARS = 32  # an id, a number, a word: masked in less time than it is looked up
MEMO_SHORT_BUDGET = 2_000_000
_short: OrderedDict[str, str] = OrderedDict()
_short_chars = [0]
_short_lock = threading.Lock()


def mask_text(text: str) -> str:
    """Replace every credential in `text`, as stored or as a reader decodes it, with a
    `[redacted:kind]` marker."""
    if not MEMO_TINY_CHARS < len(text) <= MEMO_SHORT_CHARS:
        return _mask(text)
    with _short_lock:
        found = _short.get(text)
        if found is not None:
            _short.move_to_end(text)
            return found
    masked = _mask(text)
    with _short_lock:
        if text not in _short:
            _short[text] = masked
            _short_chars[0] += len(text) + (0 if masked is text else len(masked))
            while _short_chars[0] > MEMO_SHORT_BUDGET:
                old, answer = _short.popitem(last=False)
                _short_chars[0] -= len(old) + (0 if answer is old else len(answer))
    return masked


def mask_text_unfiltered(text: str) -> str:
    """`mask_text` without its prefilters: every rule whose trigger occurs runs (the
    reference tests/test_mask_prefilter.py compares `mask_text` with)."""
    return _mask(text, filtered=False)


# Digests of large texts `mask_text` left unchanged. `mask_text` is a pure function of its
# text, so a text it left alone once it leaves alone again: a large answer served again (a
# masked graph.json, built once per ledger version) is not scanned again.
MEMO_MIN_CHARS = 64 * 1024
MEMO_ENTRIES = 64
_unchanged: OrderedDict[bytes, None] = OrderedDict()
_unchanged_lock = threading.Lock()


def mask_text_memo(text: str) -> str:
    """`mask_text`, remembering the large texts it found nothing to mask in."""
    if len(text) < MEMO_MIN_CHARS:
        return mask_text(text)
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=32).digest()
    with _unchanged_lock:
        if digest in _unchanged:
            _unchanged.move_to_end(digest)
            return text
    masked = mask_text(text)
    if masked == text:
        with _unchanged_lock:
            _unchanged[digest] = None
            while len(_unchanged) > MEMO_ENTRIES:
                _unchanged.popitem(last=False)
    return masked


def remember_unchanged(text: str) -> None:
    """Record that `mask_text` leaves `text` unchanged (known from an earlier run of the same
    code over the same text, e.g. a stored trace answer read back after a restart)."""
    if len(text) < MEMO_MIN_CHARS:
        return
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=32).digest()
    with _unchanged_lock:
        _unchanged[digest] = None
        _unchanged.move_to_end(digest)
        while len(_unchanged) > MEMO_ENTRIES:
            _unchanged.popitem(last=False)


# --- streams: the assembled text, never the fragments -------------------------------------

# A secret written through a streamed reply or tool call arrives in fragments (SSE
# `text_delta`, `thinking_delta`, `input_json_delta`, OpenAI `function.arguments` deltas),
# each too short for any rule. A viewer sees the text the fragments assemble to, masked, and
# in place of each fragment this marker.
STREAMED_FRAGMENT = "[hidden: a streamed fragment; the assembled stream is shown masked]"
ASSEMBLED_EVENT = "capsem.assembled"


def _fragment(data_text: str) -> bool:
    try:
        data = json.loads(data_text)
    except (ValueError, RecursionError):
        return False
    return streams.streamed_fragment(data)


def mask_stream(text: str) -> str:
    """A `text/event-stream` as a viewer may see it: every event that adds a fragment has its
    data replaced by `STREAMED_FRAGMENT`, the other events are masked, and one last event
    (`capsem.assembled`) carries the assembled text and thinking, masked."""
    blocks = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        lines = block.split("\n")
        data = "\n".join(
            line[5:].removeprefix(" ") for line in lines if line.partition(":")[0] == "data"
        )
        if data.strip() and _fragment(data):
            kept = [line for line in lines if line.partition(":")[0] != "data"]
            block = "\n".join([*kept, f"data: {STREAMED_FRAGMENT}"])
        blocks.append(block)
    assembled = streams.sse_text(streams.sse_events(text, limit=None))
    masked = {key: mask_text(value) for key, value in assembled.items()}
    tail = f"event: {ASSEMBLED_EVENT}\ndata: {json.dumps(masked, ensure_ascii=False)}\n\n"
    body = "\n\n".join(blocks).rstrip("\n")
    return mask_text(body) + "\n\n" + tail


def mask_stream_view(events: list[Any]) -> list[Any]:
    """The events of a body page's SSE view (`graph/bodies.py`) with each fragment's data
    replaced by `STREAMED_FRAGMENT` (the view's `assembled` text is masked like any text)."""
    shown = []
    for event in events:
        if (
            isinstance(event, dict)
            and event.get("json")
            and isinstance(event.get("data"), str)
            and _fragment(event["data"])
        ):
            event = {**event, "data": STREAMED_FRAGMENT, "json": False}
        shown.append(event)
    return shown


# --- bytes: decoded before they are masked ---------------------------------------------------

# A decoded body larger than this is not decoded further (a compression bomb is cut there; a
# body Capsem stores is at most 10 MiB, spec §4.4).
DECODED_MAX_BYTES = 16 * 1024 * 1024
_IMAGE_MAGIC = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF87a", b"GIF89a")


def _inflate(data: bytes, wbits: int) -> bytes | None:
    try:
        inflater = zlib.decompressobj(wbits)
        out = inflater.decompress(data, DECODED_MAX_BYTES)
        return out if inflater.eof or len(out) >= DECODED_MAX_BYTES or out else None
    except zlib.error:
        return None


def _unbrotli(data: bytes) -> bytes | None:
    if brotli is None:
        return None
    try:  # at most DECODED_MAX_BYTES of output (a brotli bomb is cut there)
        return brotli.Decompressor().process(data, output_buffer_limit=DECODED_MAX_BYTES)
    except Exception:  # noqa: BLE001 - brotli raises its own error type
        return None


def _unzstd(data: bytes) -> bytes | None:
    if zstandard is None:
        return None
    try:
        reader = zstandard.ZstdDecompressor().stream_reader(data)
        return reader.read(DECODED_MAX_BYTES)
    except zstandard.ZstdError:
        return None


def _wide_text(data: bytes) -> str | None:
    """UTF-32 or UTF-16 text (by its BOM, or by the NULs of mostly-ASCII text), else None."""
    for bom, codec in (
        (codecs.BOM_UTF32_LE, "utf-32"),
        (codecs.BOM_UTF32_BE, "utf-32"),
        (codecs.BOM_UTF16_LE, "utf-16"),
        (codecs.BOM_UTF16_BE, "utf-16"),
    ):
        if data.startswith(bom):
            return data.decode(codec, "replace")
    sample = data[:4096]
    if len(sample) < 8:
        return None
    for codec, width in (("utf-32-le", 4), ("utf-32-be", 4), ("utf-16-le", 2), ("utf-16-be", 2)):
        usable = sample[: len(sample) - len(sample) % width]
        if codec.endswith("le"):
            zeros = [usable[i::width] for i in range(1, width)]
        else:
            zeros = [usable[i::width] for i in range(width - 1)]
        if all(part.count(0) >= 0.8 * len(part) for part in zeros):
            text = data[: len(data) - len(data) % width].decode(codec, "replace")
            printable = sum(1 for c in text[:2048] if c.isprintable() or c in "\r\n\t")
            if printable >= 0.9 * min(len(text), 2048):
                return text
    return None


def _readable_bytes(data: bytes) -> bool:
    """Bytes that hold text a reader can read as it is (a gRPC or protobuf frame around
    strings): mostly printable ASCII. Compressed or encrypted bytes are not."""
    sample = data[:65536]
    printable = sum(1 for byte in sample if 32 <= byte < 127 or byte in (9, 10, 13))
    return printable >= 0.7 * len(sample)


_BASE64_BODY = re.compile(rb"[A-Za-z0-9+/=_\-\s]+")


def decode_body_text(data: bytes, content_type: str | None = None, depth: int = 0):
    """What a reader makes of a stored body: (text, how), `how` being "bytes" for bytes shown
    as they are (latin-1 keeps every byte), "decoded" for text decoded from a compressed,
    base64 or UTF-16/32 body, and text None for bytes that decode to nothing readable."""
    data = bytes(data)
    media = (content_type or "").lower()
    if not data or depth > 3:
        return data.decode("latin-1"), "bytes"
    if any(data.startswith(magic) for magic in _IMAGE_MAGIC) or (
        data[:4] == b"RIFF" and data[8:12] == b"WEBP"
    ):
        return data.decode("latin-1"), "bytes"
    inner: bytes | None = None
    if "base64" in media and _BASE64_BODY.fullmatch(data[:65536]):
        try:
            inner = base64.b64decode(re.sub(rb"\s+", b"", data) + b"==", altchars=None)
        except (ValueError, binascii.Error):
            try:
                inner = base64.urlsafe_b64decode(re.sub(rb"\s+", b"", data) + b"==")
            except (ValueError, binascii.Error):
                inner = None
        media = ""
    elif data[:2] == b"\x1f\x8b":
        inner = _inflate(data, 16 + zlib.MAX_WBITS)
    elif data[:4] == b"\x28\xb5\x2f\xfd":
        inner = _unzstd(data)
    elif len(data) >= 2 and data[0] & 0x0F == 8 and (data[0] << 8 | data[1]) % 31 == 0:
        inner = _inflate(data, zlib.MAX_WBITS)
    if inner is not None:
        text, _how = decode_body_text(inner, media, depth + 1)
        return text, "decoded"
    wide = _wide_text(data)
    if wide is not None:
        return wide, "decoded"
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        for unpack in (_unbrotli, lambda d: _inflate(d, -zlib.MAX_WBITS)):
            inner = unpack(data)
            if inner:
                text, _how = decode_body_text(inner, media, depth + 1)
                if text is not None:
                    return text, "decoded"
        if not _readable_bytes(data):
            return None, "hidden"
    return data.decode("latin-1"), "bytes"


def mask_bytes(data: bytes, *, force: bool = False, content_type: str | None = None) -> bytes:
    """`mask_text` over a body as a reader sees it, for the current request's policy: bytes as
    they are (latin-1 keeps every byte, so binary bodies shown as hex keep theirs), compressed,
    base64 (when `content_type` says so) and UTF-16/32 bodies decoded to UTF-8 text first;
    bytes that decode to nothing readable become `HIDDEN_BODY`."""
    if policy.get() == OPEN and not force:
        return data
    text, how = decode_body_text(data, content_type)
    if text is None:
        return HIDDEN_BODY.encode("ascii")
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if streams.is_sse(media, text):
        if how == "bytes":
            text = data.decode("utf-8", "replace")
        return mask_stream(text).encode("utf-8", "surrogatepass")
    if how == "bytes":
        return mask_text(text).encode("latin-1")
    return mask_text(text).encode("utf-8", "surrogatepass")


# --- one value, one row, one tree -----------------------------------------------------------


def redact_cell(column: str | None, value: Any) -> Any:
    """One value as an actor without `view_secrets` may see it (call only for such actors)."""
    if value is None:
        return None
    name = (column or "").lower()
    if name in CARRIER_COLUMNS:
        return HIDDEN
    if name in FREE_TEXT_COLUMNS and hide_free_text.get():
        return HIDDEN
    if isinstance(value, str):
        masked = mask_free_text(value)
        return masked if type(value) is str or masked == value else type(value)(masked)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return mask_bytes(bytes(value), force=True)
    return value


# Text the pages cut (labels, long cells, previews) says so with "…", at its end or inside a
# label made of cut parts. A credential cut there may be too short for its pattern (`ghp_`
# wants 30 characters after it): each part before a "…" is masked as if it went on as a
# token would (digits, which every token class takes, and for a JWT its missing segments),
# so a token's head is masked as the whole token would be.
CUT = "\u2026"
_CUT_PADS = ("0" * 96, "0" * 16 + ".eyJ" + "0" * 16 + "." + "0" * 16)


def _mask_head(part: str) -> str:
    """A part of a text that was cut at its end, its credential-shaped end masked."""
    for pad in _CUT_PADS:
        masked = mask_text(part + pad)
        if masked.endswith(pad):
            continue  # nothing credential-shaped reached the cut with this continuation
        marker = masked.rfind("[redacted:")  # the end was masked, the padding with it
        if marker >= 0:
            return masked[: masked.index("]", marker) + 1]
    return part


def mask_cut_text(text: str) -> str:
    """`mask_text` of a text holding a cut ("…"): the whole, then each part before a cut."""
    parts = mask_text(text).split(CUT)
    return CUT.join([_mask_head(part) for part in parts[:-1]] + parts[-1:])


def redact_tree(
    data: Any,
    key: str | None = None,
    parent: dict | None = None,
    *,
    masked: dict[str, str] | None = None,
) -> Any:
    """A plugin page's data (dicts, lists, values) with `redact_cell` applied by field name;
    OTLP attributes ({"key": name, "value": {...}}) are redacted by their `key`. `masked`:
    texts already masked (text -> `mask_text` of it, or `mask_cut_text` for a cut one), shared
    by walks of data that repeat the same texts (a trace's tree and picture); it is filled."""
    return _TreePass(hide_free_text.get(), masked).value(data, key, parent)


_BODY_VIEW_KINDS = ("json", "sse", "text", "hex")
_BODY_VIEW_TEXTS = ("text", "events", "hex", "assembled")
# Values `redact_cell` returns as they are when their field is neither a carrier nor hidden
# free text (exact types: a subclass goes through `redact_cell`).
_PLAIN = frozenset({int, float, bool})


def mask_free_text(text: str) -> str:
    """One free-text value as a viewer sees it: an event stream assembled (`mask_stream`), a
    cut text masked as the whole would be (`mask_cut_text`), any other masked."""
    if streams.is_sse("", text):
        return mask_stream(text)
    return mask_cut_text(text) if CUT in text else mask_text(text)


def viewer_free_text(text: Any) -> Any:
    """One free-text value as the current request's actor sees it: as it is for one who may
    see secrets, hidden whole under `hide_free_text`, else masked (`mask_free_text`; bytes by
    `mask_bytes`). The one function for text a page builds from free text (a label, a
    preview, a title, a summary) as well as for the value itself."""
    if value_is_open() or text is None:
        return text
    if hide_free_text.get():
        return HIDDEN if isinstance(text, (str, bytes, bytearray, memoryview)) else text
    if isinstance(text, str):
        return mask_free_text(text)
    if isinstance(text, (bytes, bytearray, memoryview)):
        return mask_bytes(bytes(text), force=True)
    return text


def value_is_open() -> bool:
    """Whether the current request's actor may see secrets (no masking, nothing hidden)."""
    return policy.get() == OPEN


def name_view() -> Callable[[str], str] | None:
    """How display names are shown to the current request's actor: None (as stored) for an
    actor who may see secrets, else `mask_free_text`. What 'did you mean' compares a typed name
    with; a pure function of the name, so lookups made with it are kept per catalog snapshot."""
    return None if value_is_open() else mask_free_text


def project_row(database: str, table: str, row: dict[str, Any]) -> dict[str, Any]:
    """A row of `table` as the current request's actor sees it, column by column as the
    registry classifies it (ledger/tables.py): shown as it is, a carrier hidden whole, free
    text by `viewer_free_text`, an unclassified column hidden. Keys that are not columns of
    the table (a page's own fields) are left to `redact_tree`."""
    if value_is_open():
        return row
    out = {}
    for name, value in row.items():
        kind = tables.column_kind(database, table, name) if isinstance(name, str) else None
        if value is None or kind in (None, tables.SHOWN):
            out[name] = value
        elif kind == tables.NAMED:
            out[name] = mask_free_text(value) if isinstance(value, str) else value
        elif kind == tables.CARRIER:
            out[name] = HIDDEN
        elif kind == tables.FREE_TEXT:
            out[name] = viewer_free_text(value)
        else:
            out[name] = UNCLASSIFIED_HIDDEN
    return out


def mask_once(masked: dict[str, str], text: str) -> str:
    """`mask_free_text` of `text`, remembered in `masked` (a pure function of the text)."""
    found = masked.get(text)
    if found is None:
        found = masked[text] = mask_free_text(text)
    return found


class _TreePass:
    """One `redact_tree` walk. A tree of a big trace repeats the same texts (kinds, names,
    models) tens of thousands of times and `mask_text` is a pure function of its text, so each
    distinct text is masked once per walk (or once per shared `masked`); a field name is
    lowered and looked up once. A mapping's strings and numbers are handled in its own loop
    (most of a tree's values: no call per value)."""

    def __init__(self, hide: bool, masked: dict[str, str] | None = None):
        self.hide = hide
        self.masked: dict[str, str] = {} if masked is None else masked
        self.names: dict[str, tuple[bool, bool, bool]] = {}

    def flags(self, key: str) -> tuple[bool, bool, bool]:
        """(carrier, carrier only inside a ledger row, free text) of a field name."""
        flags = self.names.get(key)
        if flags is None:
            name = key.lower()
            flags = self.names[key] = (
                name in CARRIER_COLUMNS,
                name in ("query", "headers"),  # carriers only inside a ledger row
                name in FREE_TEXT_FIELDS,
            )
        return flags

    def hidden(self, data: Any, key: str, parent: dict | None) -> bool:
        """Whether a (non-None) value under field `key` of `parent` is hidden whole: a carrier
        field (`query` and `headers` are also ordinary words in page data, a search query:
        they are carriers inside a ledger row), or free text when it is hidden."""
        carrier, row_only, free = self.flags(key)
        if carrier and (not row_only or {"domain", "method", "path"} & (parent or {}).keys()):
            return True
        return free and self.hide and isinstance(data, (str, bytes))

    def value(self, data: Any, key: str | None, parent: dict | None) -> Any:
        if isinstance(data, dict):
            return self.mapping(data)
        if isinstance(data, (list, tuple)):
            return [self.value(item, key, parent) for item in data]
        if data is None:
            return None
        if key and self.hidden(data, key, parent):
            return HIDDEN
        if type(data) is str:
            return mask_once(self.masked, data)
        return redact_cell(None, data)

    def mapping(self, data: dict) -> dict:
        if "key" in data and "value" in data and isinstance(data["key"], str):
            name = data["key"]
            if name.lower() in CARRIER_COLUMNS or (name in FREE_TEXT_FIELDS and self.hide):
                return {**data, "value": {"stringValue": HIDDEN}}
        if self.hide and data.get("kind") in _BODY_VIEW_KINDS:
            return {
                **{k: v for k, v in data.items() if k not in _BODY_VIEW_TEXTS},
                "kind": "text",
                "text": HIDDEN,
            }
        if data.get("kind") == "sse" and isinstance(data.get("events"), list):
            data = {**data, "events": mask_stream_view(data["events"])}
        out = {}
        masked = self.masked
        for k, v in data.items():
            kind = type(v)
            if kind is str or kind in _PLAIN:
                if k and isinstance(k, str) and self.hidden(v, k, data):
                    out[k] = HIDDEN
                elif kind is str:
                    found = masked.get(v)
                    out[k] = mask_once(masked, v) if found is None else found
                else:
                    out[k] = v
            else:
                out[k] = self.value(v, k if isinstance(k, str) else None, data)
        return out


def _redacting_row_factory(cursor: sqlite3.Cursor, row: tuple) -> sqlite3.Row:
    names = [column[0] for column in cursor.description or ()]
    return sqlite3.Row(
        cursor,
        tuple(redact_cell(names[i] if i < len(names) else None, v) for i, v in enumerate(row)),
    )


def _marking_row_factory(marks: dict[str, bool]):
    """`_redacting_row_factory`, and a visible marker for the columns the authorizer hid
    (`marks`: result name -> whether every value is replaced, not only the NULL it reads)."""

    def factory(cursor: sqlite3.Cursor, row: tuple) -> sqlite3.Row:
        names = [column[0] for column in cursor.description or ()]
        values = []
        for i, value in enumerate(row):
            name = names[i] if i < len(names) else None
            always = marks.get(name.lower()) if name else None
            if always is not None and (always or value is None):
                values.append(_hidden_marker(name))
            else:
                values.append(redact_cell(name, value))
        return sqlite3.Row(cursor, tuple(values))

    return factory


def _hidden_marker(name: str) -> str:
    return (
        HIDDEN
        if name.lower() in FREE_TEXT_COLUMNS or name.lower() in META_NAMES
        else (UNCLASSIFIED_HIDDEN)
    )


# --- the SQLite layer ------------------------------------------------------------------------

_PLAIN_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _authorizer(database: str, hidden: frozenset[str], marks: dict[str, bool] | None = None):
    """An authorizer reading every column whose kind (ledger/tables.py) is in `hidden` as
    NULL, so neither a value nor a filter, sort or expression over it reaches the actor; the
    names it hid go to `marks` (the row factory shows a marker for them). A column whose name
    Datasette quotes (a keyword: `[query]`) is not hidden here, since SQLite would rename the
    result after the quoted text: the row factory hides its every value by name instead."""
    kinds: dict[tuple[str, str], str] = {}

    def authorize(action: int, table, column, _db, _trigger) -> int:
        if action != sqlite3.SQLITE_READ or not column or not hidden:
            return sqlite3.SQLITE_OK
        kind = kinds.get((table, column))
        if kind is None:
            kind = kinds[(table, column)] = tables.column_kind(database, table, column)
        if kind not in hidden:
            return sqlite3.SQLITE_OK
        name = column.lower()
        plain = _PLAIN_NAME.match(column) is not None and name not in KEYWORD_SECRET_COLUMNS
        if marks is not None and (kind != tables.CARRIER or name not in CARRIER_COLUMNS):
            marks[name] = marks.get(name, False) or not plain
        return sqlite3.SQLITE_IGNORE if plain else sqlite3.SQLITE_OK

    return authorize


# What the actor's own SQL may not read: a name an agent chose (NAMED) reads masked on a page,
# but SQL over it (`hex(domain)`, `domain > 'sk-a'`) would read around the masker.
NOT_SHOWN = frozenset({tables.NAMED, tables.CARRIER, tables.FREE_TEXT, tables.UNCLASSIFIED})


def hidden_kinds(wanted: str, hide: bool) -> frozenset[str]:
    """The column kinds a policy reads as NULL: the actor's own SQL (HIDE_SQL) reads only
    shown columns; Datasette's own SQL (HIDE) no unclassified column, and no free text when
    it is hidden whole (its values are redacted by the row factory, by name)."""
    if wanted == HIDE_SQL:
        return NOT_SHOWN
    if wanted == HIDE:
        return frozenset({tables.UNCLASSIFIED} | ({tables.FREE_TEXT} if hide else set()))
    return frozenset()


def apply_policy(conn: sqlite3.Connection, installed, database: str = "ledger"):
    """Make `conn` enforce the current request's policy; returns the policy now installed.

    `installed` is what the connection enforces already (None for a fresh connection, which
    enforces nothing). Re-installing an authorizer expires every prepared statement, so it
    is done only when the policy changes. Rows are redacted (the row factory) on Datasette's
    routes; plugin pages (MASK) read raw values and redact what they show (`redact_tree`).
    `database`: the kind of file ("ledger", "main", "index"), whose columns the registry
    classifies."""
    wanted = policy.get()
    if wanted == MASK:
        wanted = OPEN  # plugin pages redact their output; their own SQL needs no authorizer
    hide = wanted != OPEN and hide_free_text.get()
    key = (wanted, hide, database)
    if key == installed:
        return installed
    if installed is None and wanted == OPEN:
        conn.row_factory = sqlite3.Row
        return key
    # Not None for OPEN either: setting *an* authorizer makes SQLite re-prepare cached
    # statements, so a statement prepared for a viewer cannot serve an actor who may see
    # its columns (nor the other way round).
    marks: dict[str, bool] = {}
    conn.set_authorizer(_authorizer(database, hidden_kinds(wanted, hide), marks))
    conn.row_factory = _marking_row_factory(marks) if wanted in (HIDE, HIDE_SQL) else sqlite3.Row
    return key


def columns_read(conn: sqlite3.Connection, sql: str, database: str) -> list[tuple[str, str, str]]:
    """(table, column, kind) of every column `sql` reads that is not shown raw, found by
    preparing it (EXPLAIN: nothing runs). The caller re-applies its policy afterwards (the
    connection's authorizer is replaced)."""
    found: dict[tuple[str, str], str] = {}

    def record(action: int, table, column, _db, _trigger) -> int:
        if action == sqlite3.SQLITE_READ and column:
            kind = tables.column_kind(database, table, column)
            if kind != tables.SHOWN:
                found.setdefault((table, column), kind)
        return sqlite3.SQLITE_OK

    conn.set_authorizer(record)
    try:
        conn.execute("EXPLAIN " + sql)
    except (sqlite3.Error, ValueError):
        pass  # a parameter left unbound, or SQL Datasette will refuse itself: prepared anyway
    finally:
        conn.set_authorizer(None)
    return [(table, column, kind) for (table, column), kind in found.items()]
