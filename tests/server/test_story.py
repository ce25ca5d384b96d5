"""The data-analyst story with this server alone and no set-up: in a folder of logs, with no
profile at all, `llmc` uses the built-in read-only workspace server (in-process); list the
logs, find the newest, read it."""

from __future__ import annotations

import os
from pathlib import Path

from tests.helpers import llmc


def llmc_call(cwd: Path, *args: str) -> dict:
    proc = llmc("call", *args, cwd=cwd, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.json()


def test_list_logs_find_the_newest_read_it(root: Path) -> None:
    logs = root / "logs"
    logs.mkdir()
    for day, stamp in (("2026-01-01", 1_767_225_600), ("2026-01-03", 1_767_398_400), ("2026-01-02", 1_767_312_000)):
        path = logs / f"app-{day}.log"
        path.write_text("".join(f"{day} INFO request {i}\n" for i in range(500)) + f"{day} ERROR disk full\n")
        os.utime(path, (stamp, stamp))
    (logs / "notes.txt").write_text("not a log\n")

    listing = llmc_call(root, "workspace.list_directory", "path=logs")["structuredContent"]
    entries = [e for e in listing["entries"] if e["name"].endswith(".log")]
    assert len(entries) == 3
    newest = max(entries, key=lambda e: e["modified"])
    assert newest["name"] == "app-2026-01-03.log" and newest["modified"] == "2026-01-03T00:00:00Z"

    found = llmc_call(root, "workspace.start_search", "pattern=*.log", "path=logs", "wait_ms=5000")["structuredContent"]
    assert found["done"] and len(found["results"]) == 3

    tail = llmc_call(root, "workspace.read_file", f"path=logs/{newest['name']}", "offset=-3")["structuredContent"]
    assert tail["totalLines"] == 501 and tail["offset"] == 498
    assert tail["content"].splitlines()[-1] == "2026-01-03 ERROR disk full"

    # The default is read-only: the story cannot change anything.
    proc = llmc("call", "workspace.write_file", "path=x.txt", "content=y", cwd=root, timeout=60)
    assert proc.returncode != 0 and not (root / "x.txt").exists()
