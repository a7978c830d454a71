"""The masker's prefilters (each rule's `prefilter`, and the known-token rules' triggers) only
skip work: on every text, `mask_text` gives what running every triggered rule gives."""

from __future__ import annotations

import json
import random
import threading

from datasette_capsem import redaction
from tests.helpers import HANG
from tests.test_secrets import SECRETS


def reference(text: str) -> str:
    """`mask_text` without prefilters: every rule whose trigger occurs runs."""
    return redaction.mask_text_unfiltered(text)


PIECES = [
    *SECRETS.values(),
    "password",
    "PASSWORD",
    "PassWord",
    "db_password",
    "X-Amz-Signature",
    "api_key",
    "Api-Key",
    "apikey",
    "token",
    "tokens",
    "input_tokens",
    "session_id",
    "session",
    "Bearer",
    "BASIC",
    "bearer",
    "auth",
    "Authorization",
    "cookie",
    "private_key",
    "secret",
    "sig",
    "pwd",
    "=",
    ":",
    ": ",
    " = ",
    '"',
    "'",
    '\\"',
    "&quot;",
    "&#34;",
    "&#39;",
    "&QUOT;",
    "\n",
    "\t",
    "\\n",
    " ",
    ",",
    "{",
    "}",
    "[",
    "]",
    "hunter22",
    "abcdefgh12345678",
    "é",
    "ſ",
    "K",
    "İ",
    "ı",
    "\u2192",
    "PAſſWORD",
    "toKen",
    "İ=",
    "passwordİ=x",
    "[redacted:x]",
    "postgres://user:pw@host",
    "-----BEGIN PRIVATE KEY-----",
    "_",
    "-",
]


def test_prefilters_change_nothing():
    rng = random.Random(7)
    texts = []
    for _ in range(4000):
        texts.append("".join(rng.choice(PIECES) for _ in range(rng.randint(1, 12))))
    for key in ("password", "api_key", "token", "Authorization", "secret", "sig"):
        for value in ("hunter22", SECRETS["bearer"], "a b c d", ""):
            texts.append(json.dumps({key: value}))
            texts.append(json.dumps(json.dumps({key: value})))
            texts.append(f"{key.upper()}={value}")
            texts.append(f"{key}: {value}")
            texts.append(f"Bearer {value}")
    for text in texts:
        assert redaction.mask_text(text) == reference(text), text


def test_short_and_long_texts_mask_alike():
    """Texts of every length, cut anywhere (a cut can fall inside a name, a token or an
    escape), give what every triggered rule gives, and a page link holding "session" is left
    as it is."""
    rng = random.Random(11)
    link = "/-/capsem/sessions/ce63b1b9-c406-4536-a585-fdf75605e534/events/7a4079ead3ff"
    assert redaction.mask_text(link) == link == reference(link)
    limit = 2048
    for _ in range(50):  # 400 cuts: each text cut at 4 lengths, from both ends
        text = "".join(rng.choice(PIECES + [link]) for _ in range(rng.randint(20, 400)))
        for size in (limit - 1, limit, limit + 1, len(text)):
            part = text[:size]
            assert redaction.mask_text(part) == reference(part), part
            shifted = text[-size:]
            assert redaction.mask_text(shifted) == reference(shifted), shifted


def test_memo_remembers_only_unchanged_text():
    clean = json.dumps([{"input_tokens": i, "session_id": "x"} for i in range(5000)])
    assert len(clean) >= redaction.MEMO_MIN_CHARS
    assert redaction.mask_text_memo(clean) == clean
    assert redaction.mask_text_memo(clean) == clean  # from the memo
    dirty = clean + json.dumps({"password": "hunter22"})
    once = redaction.mask_text_memo(dirty)
    assert "hunter22" not in once and redaction.mask_text_memo(dirty) == once


def test_short_texts_are_remembered_with_their_answer_within_a_budget():
    """A cell masked again on every view answers from the memo, the same answer as the masker
    gives, and the memo never holds more characters than its budget."""
    dirty = "header " + json.dumps({"password": "hunter22", "note": "x" * 40})
    first = redaction.mask_text(dirty)
    assert "hunter22" not in first and redaction._short.get(dirty) == first
    assert redaction.mask_text(dirty) == first == redaction._mask(dirty)
    for i in range(2 * redaction.MEMO_SHORT_BUDGET // 4000):
        redaction.mask_text(f"{i:08d} " + "clean text " * 360)
    assert 0 < redaction._short_chars[0] <= redaction.MEMO_SHORT_BUDGET
    assert dirty not in redaction._short  # the oldest went first
    assert (
        sum(len(k) + (0 if v is k else len(v)) for k, v in redaction._short.items())
        == (redaction._short_chars[0])
    )


def test_a_credential_cut_by_a_label_is_masked():
    """Labels and long cells are cut with "…"; a token's head left by the cut is masked as
    the whole token would be, and text that is not a token keeps its end."""
    tokens = [v for k, v in SECRETS.items() if k != "password"]
    for secret in tokens:
        for keep in (8, 12, 20, 30, len(secret) - 3):
            cut = "tool " + secret[:keep] + "…"
            shown = redaction.redact_cell(None, cut)
            assert secret[:keep] not in shown and shown.endswith("…"), (cut, shown)
    assert redaction.redact_cell(None, "linear__create_issue…") == "linear__create_issue…"
    assert redaction.redact_cell(None, "plain words…") == "plain words…"
    assert redaction.redact_cell(None, "ghp_PLANTEDSECOND0123456789abcd…") == (
        "[redacted:api-key]…"
    )
    # A label made of cut parts: "name… (origin)".
    assert redaction.redact_cell(None, "ghp_PLANTEDSECOND0123456789ab… (mcp_proxy)") == (
        "[redacted:api-key]… (mcp_proxy)"
    )
    assert redaction.redact_cell(None, 'x: {"password": "abc…def"}') == (
        'x: {"password": "[redacted:secret-field]"}'
    )


def test_the_option_prefilter_is_bounded_as_the_option_pattern_is():
    """The argv rule's prefilter admits a dash, at most one more and 41 name characters before
    the secret word, as its pattern does: options whose names are 0 to 45 characters long
    before the word (the pattern takes at most 41) are masked as with no prefilter at all."""
    for dashes in ("-", "--"):
        for length in range(46):
            name = ("a-b1" * 12)[:length]
            for text in (
                f"run {dashes}{name}password=hunter2secret",
                f"run {dashes}{name}token hunter2secret",
                f"x={dashes}{name}key\thunter2secret and more",
            ):
                assert redaction.mask_text(text) == reference(text), text


def test_long_runs_of_dashes_and_repeated_option_names_are_masked_in_one_pass():
    """The option prefilter is searched from every dash of a run: unbounded, it read the rest
    of the run each time (16 KB of `-` took 3 s to mask, 64 KB 50 s, a megabyte hours).
    Bounded, these megabyte texts are masked (the deadline only bounds a hang)."""
    texts = [
        "-" * 2**20 + " --password hunter2secret",
        "api-key" * 150_000 + " --api-key=hunter2secret",
    ]
    done: list[str] = []
    worker = threading.Thread(target=lambda: done.extend(map(redaction.mask_text, texts)))
    worker.start()
    worker.join(HANG)
    assert not worker.is_alive(), "masking a megabyte of dashes did not end"
    assert len(done) == 2 and not any("hunter2secret" in masked for masked in done)
