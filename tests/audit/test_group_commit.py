"""Group commit (audit/group.py): threads of one process appending at once share the file lock,
the write, the fsync and the anchor update, and still each returns only with its own record on
disk; the chain's order is the order the appends were made in; a failed group write fails every
append of the group and leaves no partial line; processes appending at once still make one chain."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from llmc_cli.audit import AuditLog

THREADS = 16
EACH = 12


class FsyncSpy:
    """os.fdatasync (what the log syncs its appends with) as it is, and then a pause (so appends arriving meanwhile queue up: a slow disk),
    noting how far each file was fsynced and by which thread."""

    def __init__(self, path: Path, pause: float) -> None:
        self.path, self.pause = path, pause
        self.real = os.fdatasync
        self.durable = 0  # the log's size at its last fsync
        self.calls: list[int] = []  # thread idents of the log's fsyncs
        self.lock = threading.Lock()

    def __call__(self, fd: int) -> None:
        self.real(fd)
        target = os.fstat(fd)
        if (target.st_dev, target.st_ino) == _identity(self.path):
            with self.lock:
                self.durable = max(self.durable, target.st_size)
                self.calls.append(threading.get_ident())
            if self.pause:
                threading.Event().wait(self.pause)


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        seen = os.stat(path)
    except FileNotFoundError:
        return None
    return seen.st_dev, seen.st_ino


def _end_of(data: bytes, tag: str) -> int:
    """Where the line of the record tagged `tag` ends in the file's bytes (-1: not there)."""
    at = data.find(f'"tag":"{tag}"'.encode())
    return -1 if at < 0 else data.index(b"\n", at) + 1


def test_threads_appending_at_once_share_fsyncs_and_each_returns_with_its_record_durable(tmp_path, monkeypatch):
    path = tmp_path / "audit.jsonl"
    logs = [AuditLog(path), AuditLog(path)]  # two instances on one file (the gateway's principals): one queue
    spy = FsyncSpy(path, pause=0.002)
    monkeypatch.setattr(os, "fdatasync", spy)
    ticks = itertools.count()  # the order appends began and returned in
    spans: dict[str, tuple[int, int]] = {}
    late: list[str] = []  # records not durable when their append returned
    start = threading.Barrier(THREADS)

    def appender(t: int) -> None:
        start.wait(timeout=30)
        for i in range(EACH):
            tag = f"{t}-{i}"
            began = next(ticks)
            logs[t % 2].append_many([{"event": "decision", "decision": "allow", "tag": tag}], anchor_later=True)
            returned = next(ticks)
            end = _end_of(path.read_bytes(), tag)
            if end < 0 or end > spy.durable:
                late.append(tag)
            spans[tag] = (began, returned)

    threads = [threading.Thread(target=appender, args=(t,)) for t in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads)

    assert late == []
    records = [json.loads(line) for line in path.read_text().splitlines()]
    order = [r["tag"] for r in records]
    assert sorted(order) == sorted(spans) and len(order) == THREADS * EACH  # each exactly once
    # An append that returned before another began is before it in the chain.
    position = {tag: n for n, tag in enumerate(order)}
    for a, b in itertools.permutations(spans, 2):
        if spans[a][1] < spans[b][0]:
            assert position[a] < position[b], (a, b)
    # Grouped: far fewer fsyncs of the log than appends (every append fsynced alone would be 192).
    assert len(spy.calls) < THREADS * EACH / 2, len(spy.calls)
    assert AuditLog(path).verify() == {**AuditLog(path).verify(), "ok": True, "records": THREADS * EACH}
    anchor = json.loads((tmp_path / "audit.jsonl.anchor").read_text())
    assert (anchor["head"], anchor["records"]) == (records[-1]["hash"], THREADS * EACH)


def test_a_lone_appender_writes_and_fsyncs_once_in_its_own_thread(tmp_path, monkeypatch):
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)
    log.append({"event": "outcome", "n": 0})  # the files exist
    spy = FsyncSpy(path, pause=0)
    monkeypatch.setattr(os, "fdatasync", spy)
    threads = threading.active_count()
    for n in range(1, 6):
        log.append_many([{"event": "decision", "decision": "allow", "n": n}], anchor_later=True)
        data = path.read_bytes()
        assert json.loads(data.splitlines()[-1])["n"] == n and spy.durable == len(data)  # on disk when it returns
    assert spy.calls == [threading.get_ident()] * 5  # one fsync per append, by the appender itself
    assert threading.active_count() == threads
    assert log.verify()["ok"] and log.verify()["records"] == 6


FULL_DISK = """
import json, os, resource, signal, sys, threading
from llmc_cli.audit import AuditError, AuditLog

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG, as on a full disk
path = sys.argv[1]
log = AuditLog(path)
log.append({"event": "outcome", "n": -1})  # the log, its anchor and its lock exist
real, gate, first = os.fdatasync, threading.Event(), []

def slow(fd):  # the first append holds its group's lead until the others have queued up
    real(fd)
    if threading.current_thread().name == "first" and not first:
        first.append(os.fstat(fd).st_size)
        gate.wait(20)

os.fdatasync = slow
results = {}

def append(name, size):
    try:
        log.append({"event": "decision", "decision": "allow", "who": name, "pad": "x" * size})
        results[name] = "ok"
    except AuditError as exc:
        results[name] = exc.message

lead = threading.Thread(target=append, args=("first", 10), name="first")
lead.start()
while not first:
    threading.Event().wait(0.005)
others = [threading.Thread(target=append, args=(f"t{n}", 2000)) for n in range(7)]
for thread in others:
    thread.start()
for _ in range(4000):  # all seven queued behind the first (bounded: 20 s)
    if len(log._appends.waiting) == 7:
        break
    threading.Event().wait(0.005)
resource.setrlimit(resource.RLIMIT_FSIZE, (first[0] + 5000, resource.RLIM_INFINITY))  # room for two of seven
gate.set()
for thread in [lead, *others]:
    thread.join(30)
size = os.path.getsize(path)
resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))  # space again
log.append({"event": "outcome", "n": 1})
print(json.dumps({"results": results, "first": first[0], "size": size}))
"""


def _run(script: str, *args: str) -> Any:
    proc = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=120, cwd=Path(__file__).parents[2]
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_a_group_that_does_not_fit_fails_every_append_in_it_and_leaves_no_partial_line(tmp_path):
    path = tmp_path / "audit.jsonl"
    report = json.loads(_run(FULL_DISK, str(path)))
    results = report["results"]
    assert results.pop("first") == "ok"
    assert len(results) == 7 and all("cannot write the audit log" in message for message in results.values()), results
    assert report["size"] == report["first"]  # cut back to the first append's end: nothing of the group
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r.get("who", r.get("n")) for r in records] == [-1, "first", 1]  # and the next append worked
    assert AuditLog(path).verify() == {**AuditLog(path).verify(), "ok": True, "records": 3}


THREADED_WRITER = """
import sys, threading
from llmc_cli.audit import AuditLog
log = AuditLog(sys.argv[1])

def append(t):
    for i in range(50):
        log.append_many([{"event": "decision", "decision": "allow", "tag": f"{sys.argv[2]}-{t}-{i}"}], anchor_later=True)

threads = [threading.Thread(target=append, args=(t,)) for t in range(4)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join(60)
"""


@pytest.mark.e2e  # processes: the file lock between them
def test_two_processes_of_appending_threads_make_one_chain(tmp_path):
    path = tmp_path / "audit.jsonl"
    procs = [subprocess.Popen([sys.executable, "-c", THREADED_WRITER, str(path), str(p)]) for p in range(2)]
    assert [proc.wait(timeout=120) for proc in procs] == [0, 0]
    tags = [json.loads(line)["tag"] for line in path.read_text().splitlines()]
    assert sorted(tags) == sorted(f"{p}-{t}-{i}" for p in range(2) for t in range(4) for i in range(50))
    for p, t in itertools.product(range(2), range(4)):  # each thread's records in the order it made them
        mine = [tag for tag in tags if tag.startswith(f"{p}-{t}-")]
        assert mine == [f"{p}-{t}-{i}" for i in range(50)]
    assert AuditLog(path).verify() == {**AuditLog(path).verify(), "ok": True, "records": 400}


@pytest.mark.parametrize(
    "nanos", [0, 999_999, 1_000_000, 1_764_302_645_999_999_999, 1_764_302_646_000_000_000, 1_764_302_646_123_456_789]
)
def test_a_records_time_is_what_datetime_gives(monkeypatch, nanos):
    """now_iso keeps the second's text between calls: the same text as datetime's isoformat, truncated to the millisecond."""
    from datetime import UTC, datetime, timedelta

    from llmc_cli.audit import now_iso

    monkeypatch.setattr("time.time_ns", lambda: nanos)
    expected = (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=nanos // 1000)).isoformat(timespec="milliseconds")
    assert now_iso() == expected.replace("+00:00", "Z") and now_iso() == now_iso()


def test_a_deferred_records_time_is_its_recording_s_whenever_it_is_written(tmp_path, monkeypatch):
    """audit.Deferred keeps each outcome's time.time_ns() and makes the text when it writes them
    (records.iso_times): each record says when it was recorded, in now_iso's text, across
    milliseconds and seconds, whatever the time of the write."""
    from datetime import UTC, datetime, timedelta

    from llmc_cli.audit import AuditLog
    from llmc_cli.audit.deferred import Deferred
    from llmc_cli.audit.records import iso_times, now_iso

    stamps = [1_764_302_645_999_000_000, 1_764_302_645_999_400_000, 1_764_302_646_000_000_001, 1_764_302_646_123_456_789, 7]
    clock = iter(stamps)
    log = AuditLog(tmp_path / "audit.jsonl")
    trail = Deferred(log)  # not entered: nothing writes in the background
    monkeypatch.setattr("time.time_ns", lambda: next(clock))
    for n in range(len(stamps)):
        trail.record({"event": "outcome", "n": n}, before_action=False)
    monkeypatch.setattr("time.time_ns", lambda: 2_000_000_000_000_000_000)  # written much later
    trail.flush()
    written = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]

    def text(nanos: int) -> str:
        moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=nanos // 1000)
        return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")

    assert [r["time"] for r in written] == [text(t) for t in stamps]
    for t in stamps:
        monkeypatch.setattr("time.time_ns", lambda t=t: t)
        assert iso_times([t]) == [now_iso()]


INTERRUPTED_LEADER = """
import json, os, signal, sys, threading
from llmc_cli import interrupts
from llmc_cli.audit import AuditError, AuditLog

interrupts.install()
log = AuditLog(sys.argv[1])
log.append({"event": "outcome", "n": -1})
real, gate, results, sent = os.fdatasync, threading.Event(), {}, []

def slow(fd):
    real(fd)
    if threading.current_thread().name == "first":
        gate.wait(20)  # holds the lead until the main thread and "other" have queued, in that order
    elif threading.current_thread() is threading.main_thread() and not sent:
        sent.append(1)
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while the main thread writes its group

os.fdatasync = slow

def append(name):
    try:
        log.append({"event": "decision", "decision": "allow", "who": name})
        results[name] = "ok"
    except AuditError as exc:
        results[name] = exc.message

def queued(count):
    for _ in range(4000):  # bounded: 20 s
        if len(log._appends.waiting) == count:
            return
        threading.Event().wait(0.005)

def arrange():
    queued(1)  # the main thread waits behind "first"
    other = threading.Thread(target=append, args=("other",))
    other.start()
    queued(2)
    gate.set()
    other.join(30)

first = threading.Thread(target=append, args=("first",), name="first")
first.start()
queued(0)
while not log._appends.busy:
    threading.Event().wait(0.005)
helper = threading.Thread(target=arrange)
helper.start()
try:
    append("main")
except interrupts.Interrupted:
    results["main"] = "interrupted"
helper.join(30)
first.join(30)
print(json.dumps(results))
"""


def test_an_interrupted_leader_reports_its_group_as_written(tmp_path):
    """Ctrl-C while the main thread writes a group (its own record and another thread's): the
    write finishes, the other thread's append succeeds, and the interruption is raised after."""
    path = tmp_path / "audit.jsonl"
    results = json.loads(_run(INTERRUPTED_LEADER, str(path)))
    assert results == {"first": "ok", "other": "ok", "main": "interrupted"}
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r.get("who", r.get("n")) for r in records] == [-1, "first", "main", "other"]
    assert AuditLog(path).verify()["ok"]


def test_groups_rotate_the_file_and_the_chain_runs_on_across_files(tmp_path):
    path = tmp_path / "audit.jsonl"
    logs = [AuditLog(path, max_bytes=3000), AuditLog(path, max_bytes=3000)]

    def appender(t: int) -> None:
        for i in range(25):
            logs[t % 2].append({"event": "outcome", "tag": f"{t}-{i}"})

    threads = [threading.Thread(target=appender, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    files = logs[0].files()
    lines = [line for _, _, line in logs[0].records()]
    # A file is rotated once it reaches the size, so it may pass it by one group: at most one record
    # per appending thread (a record is ~215 bytes with its chain fields, not a round 200).
    longest = max(len(line.encode()) + 1 for line in lines)
    assert len(files) > 5 and all(f.stat().st_size < 3000 + 8 * longest for f in files)
    tags = [json.loads(line)["tag"] for line in lines]
    assert sorted(tags) == sorted(f"{t}-{i}" for t in range(8) for i in range(25))
    assert logs[1].verify() == {**logs[1].verify(), "ok": True, "records": 200}
