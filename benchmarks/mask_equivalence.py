"""Whether this redaction.py masks exactly as another version does: byte-identical `mask_text`
output (filtered and unfiltered), the same set of spans (the stored-text pass and the decoded
reading), and the same `decoded_reading`, on every text of a corpus.

The corpus: the credential corpus of tests/corpus/ (each sample as text and as each text
encoding), the secret-free corpus, the texts benchmarks/bench_mask.py times (and its hostile
ones, cut to 64 KB), and any texts recorded elsewhere (`--texts FILE.pkl`: a pickled list of
strings or of (string, filtered) pairs, e.g. every text a viewer crawl gave the masker).

Usage: python benchmarks/mask_equivalence.py --baseline OLD_REDACTION_PY [--texts FILE.pkl ...]
"""

from __future__ import annotations

import argparse
import pickle
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_mask import HOSTILE, load, texts  # noqa: E402
from datasette_capsem import redaction  # noqa: E402
from tests.corpus.encodings import CREDENTIALS, TEXT_ENCODINGS, clean_texts  # noqa: E402


def corpus(recorded: list[str]) -> list[str]:
    found: dict[str, None] = {}
    for row in CREDENTIALS:
        found[row["text"]] = None
        for encode in TEXT_ENCODINGS.values():
            found[encode(row["text"])] = None
    for _name, text in clean_texts():
        found[text] = None
    for text in texts().values():
        found[text] = None
    for text in HOSTILE:
        found[text[:65536]] = None
    for path in recorded:
        with open(path, "rb") as handle:
            for item in pickle.load(handle):
                found[item[0] if isinstance(item, tuple) else item] = None
    return list(found)


def spans(module, text: str, filtered: bool) -> set[tuple[int, int, str]]:
    return set(module._spans(text, text.lower(), filtered=filtered)) | set(
        module._decoded_spans(text, filtered=filtered)
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--baseline", required=True, help="the redaction.py to compare with")
    parser.add_argument("--texts", action="append", default=[], help="a pickle of texts")
    parser.add_argument("--no-spans", action="store_true", help="compare the output only")
    args = parser.parse_args()
    old = load(args.baseline)
    samples = corpus(args.texts)
    print(f"{len(samples)} texts, {sum(map(len, samples)) / 1e6:.1f} M characters")
    differ = 0
    timed = {"baseline": 0.0, "this": 0.0}
    for n, text in enumerate(samples):
        for filtered in (True, False):
            started = time.process_time()
            before = old._mask(text, filtered=filtered)
            timed["baseline"] += time.process_time() - started
            started = time.process_time()
            after = redaction._mask(text, filtered=filtered)
            timed["this"] += time.process_time() - started
            problems = []
            if before != after:
                problems.append("output")
            if not args.no_spans and spans(old, text, filtered) != spans(redaction, text, filtered):
                problems.append("spans")
            if filtered and old.decoded_reading(text) != redaction.decoded_reading(text):
                problems.append("decoded_reading")
            if problems:
                differ += 1
                print(f"DIFFERS ({', '.join(problems)}) #{n} filtered={filtered}: {text[:120]!r}")
    print(
        f"{differ} differences; _mask CPU: baseline {timed['baseline']:.2f} s, "
        f"this {timed['this']:.2f} s"
    )
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
