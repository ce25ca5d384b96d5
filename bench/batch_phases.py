"""Instructions of `llmc call --batch` by phase, under callgrind: a dump at each of the batch's
phases (reading the lines, routing, validating and authorizing, the decision records, then the calls
with the final flush of the outcome records, and the exit). Per call: the difference of two batch
sizes. Needs valgrind, its headers (valgrind/callgrind.h) and a C compiler (the dump is a client
request, made by a small library built on first use).

    PYTHONHASHSEED=0 PYTHONPATH=TREE valgrind --tool=callgrind --trace-children=no \\
        --callgrind-out-file=OUT.N.cg python -P bench/batch_phases.py call --batch FILE --yes --stdio SERVER
    python bench/batch_phases.py --per-call OUT.101.cg OUT.301.cg 200

(the second form: each phase's instructions, 301-call run minus 101-call run, divided by 200;
"before X" is what ran since the previous mark up to the start of X).
Run the batch once without valgrind first (bytecode caches)."""

from __future__ import annotations

import ctypes
import functools
import glob
import os
import re
import runpy
import subprocess
import sys
import tempfile

HELPER = os.path.join(tempfile.gettempdir(), "llmc-bench-callgrind-dump.so")
SOURCE = "#include <valgrind/callgrind.h>\nvoid dump(const char *s) { CALLGRIND_DUMP_STATS_AT(s); }\n"


def per_call(first: str, second: str, calls: int) -> None:
    def phases(prefix: str) -> dict[str, int]:
        out: dict[str, int] = {}

        def number(path: str) -> int:
            suffix = path.rsplit(".", 1)[-1]
            return int(suffix) if suffix.isdigit() else 0

        for path in sorted(glob.glob(prefix + "*"), key=number):  # in the order of the dumps
            with open(path) as f:
                text = f.read()
            trigger = re.search(r"^desc: Trigger: Client Request: (.*)$", text, re.M)
            total = re.search(r"^(?:summary|totals): (\d+)", text, re.M)
            if trigger and total:
                out[trigger.group(1)] = out.get(trigger.group(1), 0) + int(total.group(1))
        return out

    a, b = phases(first), phases(second)
    for name in a:
        print(f"{name:40} {(b.get(name, 0) - a[name]) / calls / 1000:8.1f} k a call")
    print(f"{'total':40} {(sum(b.values()) - sum(a.values())) / calls / 1000:8.1f} k a call")


def run(argv: list[str]) -> None:
    if not os.path.exists(HELPER):
        with tempfile.NamedTemporaryFile("w", suffix=".c", delete=False) as c:
            c.write(SOURCE)
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", HELPER, c.name], check=True)
    dump = ctypes.CDLL(HELPER).dump

    def mark(name: str) -> None:
        dump(name.encode())

    def wrapped(owner: object, name: str, label: str) -> None:
        original = getattr(owner, name)

        @functools.wraps(original)
        def phase(*args: object, **kwargs: object) -> object:
            mark(f"before {label}")
            try:
                return original(*args, **kwargs)
            finally:
                mark(label)

        setattr(owner, name, phase)

    import llmc_cli.cli.batch as cli_batch
    import llmc_cli.services.batch as batch
    import llmc_cli.services.pipeline as pipeline

    wrapped(cli_batch, "read_lines", "1 read_lines")
    wrapped(batch.Batch, "_route", "2 route")
    if hasattr(batch.Batch, "_decide"):  # validation and authorization one loop over the calls (session 16)
        wrapped(batch.Batch, "_decide", "4 validate, authorize (with decide)")
    else:  # a tree from before
        wrapped(batch.Batch, "_validate", "3 validate")
        wrapped(batch.Batch, "_authorize", "4 authorize (with decide)")
    wrapped(pipeline.Pipeline, "decide", "5 decide: decision records")
    wrapped(batch.Batch, "run", "6 the calls, the outcome records")
    sys.argv = ["llmc", *argv]
    try:
        runpy.run_module("llmc_cli", run_name="__main__")
    finally:
        mark("7 exit")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--per-call"]:
        per_call(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        run(sys.argv[1:])
