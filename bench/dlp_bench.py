"""Precision, recall and cost of DLP detector candidates on the labelled set of bench/dlp_set.py.

    .venv/bin/python bench/dlp_bench.py [--seed 36 --count 2000] [--candidates llmc,phonenumbers,detect-secrets,presidio]

A finding counts as a true positive when it overlaps a labelled value of the same kind; any
other finding is a false positive (every finding in a clean sample is one); a labelled value no
finding of its kind overlaps is a miss. Cost: the median over 5 runs of the first --timed samples, in
microseconds per sample, after one warm-up run (so imports and compiled patterns are not counted;
the first-use import is timed separately). A candidate whose package is not installed is skipped
(Presidio: `pip install presidio-analyzer` in a separate environment, then run this file with it
and PYTHONPATH=. ; no spaCy model is needed for its pattern recognizers).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from dlp_set import build  # noqa: E402

KINDS = ("email", "phone", "credit_card", "iban", "secret", "private_key")
Finder = Callable[[str], list[tuple[str, int, int]]]


def llmc_candidate() -> Finder:
    from llmc_cli.guard import detectors

    def find(text: str) -> list[tuple[str, int, int]]:
        return [(s.kind, s.start, s.end) for s in detectors.find(text, KINDS)]

    return find


def phonenumbers_candidate() -> Finder:
    """libphonenumber's matcher alone (VALID leniency, region US): what it finds without our context rule."""
    import phonenumbers

    def find(text: str) -> list[tuple[str, int, int]]:
        return [
            ("phone", m.start, m.end) for m in phonenumbers.PhoneNumberMatcher(text, "US", leniency=phonenumbers.Leniency.VALID)
        ]

    return find


def detect_secrets_candidate() -> Finder:
    """detect-secrets' default plugins (all of them, high-entropy and keyword included), line by line."""
    from detect_secrets.core.scan import scan_line
    from detect_secrets.settings import default_settings

    def find(text: str) -> list[tuple[str, int, int]]:
        out = []
        with default_settings():
            offset = 0
            for line in text.split("\n"):
                for secret in scan_line(line):
                    value = secret.secret_value or ""
                    at = line.find(value) if value else -1
                    kind = "private_key" if secret.type == "Private Key" else "secret"
                    if at >= 0:
                        out.append((kind, offset + at, offset + at + len(value)))
                offset += len(line) + 1
        return out

    return find


def presidio_candidate() -> Finder:
    """Presidio's pattern recognizers (no NLP engine, no spaCy model): email, phone, card, IBAN, plus
    its generic ones a result would meet (IP addresses, URLs are not scored here)."""
    import logging

    logging.getLogger("tldextract").setLevel(logging.CRITICAL)
    from presidio_analyzer.predefined_recognizers import CreditCardRecognizer, EmailRecognizer, IbanRecognizer, PhoneRecognizer

    recognizers = [
        (EmailRecognizer(), "EMAIL_ADDRESS", "email"),
        (PhoneRecognizer(), "PHONE_NUMBER", "phone"),
        (CreditCardRecognizer(), "CREDIT_CARD", "credit_card"),
        (IbanRecognizer(), "IBAN_CODE", "iban"),
    ]

    def find(text: str) -> list[tuple[str, int, int]]:
        out = []
        for recognizer, entity, kind in recognizers:
            for r in recognizer.analyze(text, [entity], None):
                if r.score >= 0.4:  # the analyzer's usual threshold for pattern results without context
                    out.append((kind, r.start, r.end))
        return out

    return find


def detect_secrets_providers_candidate() -> Finder:
    """detect-secrets' provider patterns only, as llmc's secret detector uses them (no keyed values,
    no providers it lacks): what the library alone brings."""
    from llmc_cli.guard import detectors

    patterns = detectors.provider_patterns()[: -len(detectors._MORE_SECRETS)]

    def find(text: str) -> list[tuple[str, int, int]]:
        out = []
        for pattern in patterns:
            for m in pattern.finditer(text):
                start, end = m.span(m.lastindex) if m.lastindex else m.span()
                out.append(("secret", start, end))
        return out

    return find


# name -> (the candidate, the kinds it covers)
CANDIDATES: dict[str, tuple[Callable[[], Finder], tuple[str, ...]]] = {
    "llmc": (llmc_candidate, KINDS),
    "phonenumbers": (phonenumbers_candidate, ("phone",)),
    "detect-secrets": (detect_secrets_candidate, ("secret", "private_key")),
    "detect-secrets-providers": (detect_secrets_providers_candidate, ("secret",)),
    "presidio": (presidio_candidate, ("email", "phone", "credit_card", "iban")),
}


def score(find: Finder, samples: list[dict]) -> dict[str, dict[str, int]]:
    counts = {k: {"tp": 0, "fp": 0, "fn": 0} for k in KINDS}
    for sample in samples:
        text = sample["text"]
        labels = [(kind, text.find(value), text.find(value) + len(value)) for kind, value in sample["labels"]]
        found = find(text)
        for kind, start, end in found:
            if any(k == kind and start < e and s < end for k, s, e in labels):
                counts[kind]["tp"] += 1
            else:
                counts[kind]["fp"] += 1
        for kind, s, e in labels:
            if not any(k == kind and start < e and s < end for k, start, end in found):
                counts[kind]["fn"] += 1
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=36)
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--candidates", default=",".join(CANDIDATES))
    parser.add_argument("--timed", type=int, default=400, help="samples in each timed run")
    parser.add_argument("--show-errors", action="store_true", help="print each false positive and miss")
    args = parser.parse_args()
    samples = build(args.seed, args.count)
    sensitive = sum(1 for s in samples if s["labels"])
    print(f"{len(samples)} samples ({sensitive} with findings, {len(samples) - sensitive} clean), seed {args.seed}\n")
    print("| candidate | kind | precision | recall | false positives | misses |")
    print("|---|---|---|---|---|---|")
    costs = []
    for name in args.candidates.split(","):
        started = time.perf_counter()
        try:
            factory, covered = CANDIDATES[name]
            find = factory()
            find("warm up: a.b@example.com +1 212 555 0100")
        except ImportError as exc:
            print(f"| {name} | (not installed: {exc.name}) | | | | |")
            continue
        first_use = (time.perf_counter() - started) * 1000
        counts = score(find, samples)
        for kind in covered:
            c = counts[kind]
            precision = c["tp"] / (c["tp"] + c["fp"]) if c["tp"] + c["fp"] else float("nan")
            recall = c["tp"] / (c["tp"] + c["fn"]) if c["tp"] + c["fn"] else float("nan")
            print(f"| {name} | {kind} | {precision:.3f} | {recall:.3f} | {c['fp']} | {c['fn']} |")
        runs = []
        timed = samples[: args.timed]
        for _ in range(5):
            t = time.perf_counter()
            for sample in timed:
                find(sample["text"])
            runs.append((time.perf_counter() - t) / len(timed) * 1e6)
        costs.append((name, statistics.median(runs), first_use))
        if args.show_errors:
            for sample in samples:
                text = sample["text"]
                for kind, s, e in find(text):
                    if not any(k == kind and text.find(v) < e and s < text.find(v) + len(v) for k, v in sample["labels"]):
                        print(f"  FP {name} {kind}: {text[s:e]!r} in {text[:80]!r}", file=sys.stderr)
                found = find(text)
                for kind, value in sample["labels"]:
                    s = text.find(value)
                    if not any(k == kind and s < fe and fs < s + len(value) for k, fs, fe in found):
                        print(f"  MISS {name} {kind}: {value[:60]!r}", file=sys.stderr)
    print("\n| candidate | µs per sample (median of 5) | first use (imports), ms |")
    print("|---|---|---|")
    for name, cost, first_use in costs:
        print(f"| {name} | {cost:.0f} | {first_use:.0f} |")


if __name__ == "__main__":
    main()
