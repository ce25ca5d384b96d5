"""The audit seal in process: a decision record and an outcome record of a batch call (as
services builds them, time given as a Deferred gives it) chained and appended to a file log,
N times, in appends of 16 pairs (32 records, a Deferred's group). For instruction counts independent of
the load, the difference of two callgrind runs (fdatasync is the kernel's: not counted):

    PYTHONHASHSEED=0 PYTHONPATH=TREE valgrind --tool=callgrind python bench/seal_instructions.py 0
    PYTHONHASHSEED=0 PYTHONPATH=TREE valgrind --tool=callgrind python bench/seal_instructions.py 1600

(Collected of the second minus the first) / 1600 = instructions a pair of records (a call's). With
`seal` after N: the seal alone (no file, no lock), the same records."""

import sys
import tempfile
from pathlib import Path

from llmc_cli import model
from llmc_cli.audit import AuditLog
from llmc_cli.audit.trail import sealer

N = int(sys.argv[1])
seal_only = len(sys.argv) > 2 and sys.argv[2] == "seal"
base = {
    "user": "root",
    "host": "vm",
    "pid": 12149,
    "profile": "builtin:default",
    "command": "batch",
    "server": "mcp-server-everything",
    "tool": "echo",
    "arguments": {"message": "77"},
    "callHash": "hmac-sha256:99ba181f5e257e2072ea66b7804669c789a2fd74e4b99f225393777ab661fb29",
}
decision = {**base, "event": "decision", "decision": "allow", "rule": "default: allow (--yes)", "reason": "confirmed with --yes"}
outcome = {
    **base,
    "event": "outcome",
    "outcome": "ok",
    "durationMs": 1.3,
    "resultBytes": 46,
    "resultSha256": "05c6df5659b0804b15da43f1f1023a914ed457083d27f7ba29f686c8630e0d29",
}
group = [decision, outcome] * 16
times = ["2026-11-29T05:45:20.474Z"] * len(group)
for _ in range(70):
    model.canonical_json({"message": "77"})  # past the switch to orjson
model.expect_hashing(1 << 20)  # a batch's: OpenSSL's SHA-256 from the start
with tempfile.TemporaryDirectory() as d:
    log = AuditLog(Path(d) / "audit.jsonl")
    log.append_many(list(group), times=times)
    written: list = []
    prev = "0" * 64
    for _ in range(N // 16):
        if seal_only:
            sealer(group, written, times)(prev, 0)
        else:
            log.append_many(group, times=times)
    log.release()
