"""The masker (`datasette_capsem/redaction.py`) measured both ways, and its speed.

Prints:
- recall on the credential corpus of tests/corpus/ (every kind x placement x encoding): the
  share of samples from which no planted secret can be read back, and every miss;
- precision on the secret-free corpus (this project's docs, Capsem's notes, about 45 modules of
  Python's standard library): masked spans per 100 KB, and every span;
- the time `mask_text` takes per MB of text, for clean prose and code, for JSON event rows
  holding secrets, for a page of JSON with non-ASCII (escaped) text, and for a memo hit;
  and per call for the short strings a page's tree is made of (names, times, ids, links);
  and the slowest of ~25 hostile texts (a trigger repeated over 1 MB: `eyJeyJ…`, `key: key: …`,
  `password=password=…`), whose time must stay linear.

With `--baseline FILE` (another version of redaction.py, e.g. `git show
<commit>:datasette_capsem/redaction.py > /tmp/before.py`) the same figures are printed for it,
and its speed is measured interleaved with this one's (a loaded machine slows both alike).

Usage: python benchmarks/bench_mask.py [--misses] [--spans] [--repeat 5] [--baseline FILE]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from datasette_capsem import redaction  # noqa: E402
from tests.corpus import measure  # noqa: E402
from tests.corpus.encodings import CREDENTIALS, clean_texts  # noqa: E402


def per_mb(function, text: str, repeat: int) -> float:
    """Median seconds per MB (of UTF-8) for `function(text)`."""
    size = len(text.encode("utf-8")) / 1e6
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        function(text)
        times.append(time.perf_counter() - started)
    return statistics.median(times) / size


def texts() -> dict[str, str]:
    clean = "\n".join(text for _name, text in clean_texts())
    rng = random.Random(3)
    rows = []
    for i in range(4000):
        row = {"event_id": f"{i:012x}", "input_tokens": rng.randint(1, 9999), "model": "m"}
        if i % 40 == 0:
            row["arguments"] = rng.choice(CREDENTIALS)["text"]
        else:
            row["text"] = "The tool listed 3 files and the basic structure of the repo."
        rows.append(row)
    events = json.dumps(rows)
    accented = json.dumps(
        [{"id": i, "text": "Résumé of the café's menu — naïve façade"} for i in range(8000)]
    )
    return {"clean prose+code": clean, "JSON rows with secrets": events, "JSON, escaped": accented}


def load(path: str):
    spec = importlib.util.spec_from_file_location("baseline_redaction", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def figures(name: str, masker, args) -> None:
    recall = measure.recall(masker)
    kinds = len({row["kind"] for row in CREDENTIALS})
    print(
        f"{name} recall: {recall.percent:.2f}% of {recall.samples} samples "
        f"({kinds} kinds x 5 placements x {recall.samples // len(CREDENTIALS)} encodings), "
        f"{len(recall.misses)} missed"
    )
    by_encoding = Counter(miss[2] for miss in recall.misses)
    if by_encoding:
        print("  misses by encoding:", dict(by_encoding.most_common()))
    for miss in recall.misses if args.misses else recall.misses[:10]:
        print("  miss:", miss)
    precision = measure.precision(masker)
    print(
        f"{name} precision: {len(precision.spans)} masked spans in "
        f"{precision.chars / 1e6:.2f} MB of secret-free text = "
        f"{precision.per_100kb:.2f} per 100 KB (bound: 1)"
    )
    for span in precision.spans if args.spans else precision.spans[:10]:
        print("  span:", span)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--misses", action="store_true", help="list every recall miss")
    parser.add_argument("--spans", action="store_true", help="list every masked clean span")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--baseline", help="another redaction.py to compare with")
    args = parser.parse_args()

    maskers = {"this": redaction}
    if args.baseline:
        maskers["baseline"] = load(args.baseline)
    for name, masker in maskers.items():
        figures(name, masker, args)

    print(f"mask_text speed, ms per MB (median of {args.repeat} runs, interleaved):")
    samples = texts()
    big = json.dumps([{"input_tokens": i, "session_id": "x"} for i in range(40000)])
    samples["memo hit (clean JSON)"] = big
    for name, text in samples.items():
        functions = {
            masker_name: masker.mask_text_memo if name.startswith("memo") else masker.mask_text
            for masker_name, masker in maskers.items()
        }
        times: dict[str, list[float]] = {masker_name: [] for masker_name in maskers}
        for function in functions.values():
            function(text)  # warm (and fills the memo of a memo run)
        for _ in range(args.repeat):  # one run of each in turn
            for masker_name, function in functions.items():
                times[masker_name].append(per_mb(function, text, 1))
        row = [f"{n} {statistics.median(t) * 1000:8.1f}" for n, t in times.items()]
        print(f"  {name:<24} {len(text) / 1e6:5.2f} MB  " + "  ".join(row))
    short_strings(maskers, args.repeat)
    hostile({"this": redaction})


SHORT = [
    "claude-sonnet-4",
    "2026-08-01T00:00:00.000000Z",
    "model_calls",
    "input_tokens",
    "allowed",
    "/-/capsem/sessions/ce63b1b9-c406-4536-a585-fdf75605e534/events/7a4079ead3ff",
    "The tool listed 3 files and the basic structure of the repo.",
    '{"command": "ls -la /tmp && cat notes.txt"}',
    "api.anthropic.com",
    "tool_use",
]


def short_strings(maskers: dict, repeat: int) -> None:
    times: dict[str, list[float]] = {name: [] for name in maskers}
    for _ in range(repeat):
        for name, masker in maskers.items():
            started = time.perf_counter()
            for _ in range(200):
                for text in SHORT:
                    masker.mask_text(text)
            times[name].append((time.perf_counter() - started) / (200 * len(SHORT)))
    row = [f"{n} {statistics.median(t) * 1e6:8.1f}" for n, t in times.items()]
    print(f"  {'short strings, us/call':<24} {'':8}  " + "  ".join(row))


HOSTILE = [
    "T3BlbkFJ " + "A" * 1_000_000,
    "eyJ" * 300_000,
    "A" * 1_000_000 + "T3BlbkFJ",
    "-----BEGIN PRIVATE KEY-----" * 20000,
    "password=" * 100000,
    "key: " * 200000,
    "%25" * 300000,
    "a@b:c@" * 100000,
    "http://" + "a:" * 100000,
    '"name": "x", ' * 50000,
    "token " * 150000,
    "x-api-key: " * 80000,
    "login a password " * 50000,
    "a:1:b:c:" * 100000,
    "\tTRUE\t" * 100000,
    "secret is " * 100000,
    "<password>" * 100000,
    "--password " * 90000,
    "sshpass -p " * 90000,
    "curl -u " * 100000,
    'name="pw" value="' * 50000,
    "&amp;" * 200000,
    "\\u0070" * 150000,
    "SG." * 300000,
    "xapp-1-" * 100000,
    "ghp_" * 250000,
    "sk-" * 300000,
    # the places a rule is tried at (redaction.Rule.starts): many, or one after a long run
    "abcdefghijklmnopqrst://" * 45000,
    "a://" * 250000,
    "http " * 200000 + "-u a:b",
    "passw \n" * 140000,
    "bearer basic token " * 50000,
    # a run the argv option prefilter was searched over from each of its dashes (quadratic
    # until it was bounded as its pattern is: 64 KB of `-` took 50 s)
    "-" * 1_000_000 + " --password hunter2",
    "api-key" * 150_000,
]


def hostile(maskers: dict) -> None:
    for name, masker in maskers.items():
        worst = max(HOSTILE, key=lambda text: per_mb(masker.mask_text, text, 1))
        seconds = per_mb(masker.mask_text, worst, 1)
        print(
            f"  hostile, slowest of {len(HOSTILE)}: {name} {seconds * 1000:8.1f} ms/MB ({worst[:16]!r}…)"
        )


if __name__ == "__main__":
    main()
