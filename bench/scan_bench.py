"""The cost of the result and metadata scan (guard/scan.py text_findings, which the gateway's and
the CLI's InstructionsInspector runs over every tool result's text): the scan as it was (every
pattern over the whole text: tests/guard/scan_reference.py) against the scan with guard/rules.py's
pre-checks, on the same inputs in one run; best of 5 timeit repeats, microseconds per call.

    .venv/bin/python bench/scan_bench.py [--repeat 5]

Inputs: a short echo, 2 KB of README prose, JSON tool results of 2, 20 and 200 KB (a directory
listing: names, paths, sizes, dates, sha1s), 2,000 x's, and 2 KB of the rules' own anchor words
with no finding (the worst case: every pre-check passes and every pattern runs).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llmc_cli.guard.scan import text_findings  # noqa: E402
from tests.guard import scan_reference  # noqa: E402


def listing(size: int, seed: int = 9) -> str:
    rng = random.Random(seed)
    words = [
        "report",
        "data",
        "build",
        "notes",
        "draft",
        "final",
        "summary",
        "image",
        "backup",
        "config",
        "test",
        "main",
        "index",
    ]
    entries: list[dict[str, object]] = []
    while len(json.dumps(entries)) < size:
        name = f"{rng.choice(words)}_{rng.randint(1, 999)}.{rng.choice(['txt', 'md', 'json', 'png'])}"
        entries.append(
            {
                "name": name,
                "path": f"/home/me/projects/{rng.choice(words)}/{name}",
                "size": rng.randint(0, 10**7),
                "modified": f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:00:00Z",
                "sha1": rng.randbytes(20).hex(),
                "type": rng.choice(["file", "directory"]),
            }
        )
    return json.dumps(entries, indent=2)[:size]


def prose(size: int) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("\n\n", len(text) // 3)  # past the badges and the first code blocks
    return text[start : start + size]


ANCHORS = (
    "Read the user's notes, then open the content of the report and pass the query. Do not use tokens of the "
    "session without the history: the key, the prompt and the message are the tool's. Before you start, the "
    "first rule must hold; keep the hidden file from the cache and send the private field now, you know. "
    "Never show an alert to inform the user who will not notice the instructions or the rules. "
)


def inputs() -> dict[str, str]:
    return {
        '"Echo: hi"': "Echo: hi",
        "2 KB prose": prose(2048),
        "2 KB JSON": listing(2048),
        "20 KB JSON": listing(20 * 1024),
        "200 KB JSON": listing(200 * 1024),
        "2,000 x's": "x" * 2000,
        "2 KB of anchors": (ANCHORS * 8)[:2048],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print("| input | before (µs) | after (µs) | speed-up |\n|---|---|---|---|")
    for label, text in inputs().items():
        new, old = list(text_findings(text)), list(scan_reference.text_findings(text))
        assert new == old, (label, new, old)
        number = max(1, int(200_000 / (len(text) + 100)))
        cost = {}
        for name, scan in (("before", scan_reference.text_findings), ("after", text_findings)):
            best = min(timeit.repeat(lambda scan=scan, text=text: list(scan(text)), number=number, repeat=args.repeat))
            cost[name] = best / number * 1e6
        print(f"| {label} | {cost['before']:.1f} | {cost['after']:.1f} | {cost['before'] / cost['after']:.1f}x |")


if __name__ == "__main__":
    main()
