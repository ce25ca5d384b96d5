"""`llmc call --batch`: many calls over one connection per server, results in input order."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import audit_trail, llmc, sdk_server


def write_profile(isolated_dirs: Path, policy: str = "") -> None:
    path = isolated_dirs / "config" / "profiles" / "default.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    server = sdk_server("sdk_server.py")
    path.write_text(f"""
[servers.a]
command = "{server[0]}"
args = ["{server[1]}", "--rendezvous"]
[servers.b]
command = "{server[0]}"
args = ["{server[1]}", "--rendezvous"]
[policy]
confirm_destructive = false
{policy}
[policy.hints."*.slow"]
readOnly = true
[policy.hints."*.meet"]
readOnly = true
""")


def batch(lines: list[object], *args: str) -> tuple[int, list[dict], str]:
    text = "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n"
    proc = llmc("call", "--batch", "-", *args, stdin=text)
    return proc.returncode, [json.loads(line) for line in proc.stdout.splitlines()], proc.stderr


def test_results_come_in_input_order_with_ids_and_errors(isolated_dirs):
    write_profile(isolated_dirs)
    code, out, _ = batch(
        [
            {"id": 1, "tool": "a.add", "arguments": {"a": 1, "b": 2}},
            "{not json",
            {"id": "two", "tool": "b.echo", "arguments": {"message": "hi"}},
            {"id": 3, "tool": "a.fail", "arguments": {}},
            {"id": 4, "tool": "nope.x"},
            {"id": 5, "tool": "a.echo", "arguments": "not an object"},
        ]
    )
    assert [o["id"] for o in out] == [1, None, "two", 3, 4, 5]
    assert out[0]["structuredContent"] == {"result": 3} and out[0]["server"] == "a"
    assert out[1]["error"]["exitCode"] == 2 and "line 2" in out[1]["error"]["message"]
    assert out[2]["content"][0]["text"] == "hi" and out[2]["server"] == "b"
    assert out[3]["isError"] is True
    assert out[4]["error"]["error"] == "usage" and out[5]["error"]["error"] == "usage"
    assert code == 2  # the worst seen


def test_fail_fast_skips_the_rest(isolated_dirs):
    write_profile(isolated_dirs)
    code, out, _ = batch(
        [{"id": i, "tool": "a.fail" if i == 1 else "a.echo", "arguments": {"message": "m"}} for i in range(4)], "--fail-fast"
    )
    assert code == 1
    assert "content" in out[0] and out[1]["isError"]
    # services say what happened (SkippedAfterFailure); the CLI names the option that asked for it
    assert all(o["error"]["message"] == "skipped: an earlier call failed (--fail-fast)" for o in out[2:])
    # Decided (and audited) up front, so a skipped call is audited as skipped: no decision dangles.
    audit = audit_trail(isolated_dirs / "state")
    assert sorted(r.get("outcome") for r in audit if r["event"] == "outcome") == ["ok", "skipped", "skipped", "tool_error"]


def test_read_only_calls_run_in_parallel_and_servers_concurrently(isolated_dirs):
    """Each call waits inside the tool until all eight are inside at once (sdk_server's `meet`):
    every call answers "met" only if the four of each server ran in parallel and both servers
    at the same time. Run one after another, the first would wait alone until its timeout."""
    write_profile(isolated_dirs)
    place = isolated_dirs / "meeting"
    place.mkdir()
    meet = {"place": str(place), "count": 8, "timeout": 60}
    calls = [{"id": i, "tool": "a.meet", "arguments": meet} for i in range(4)]
    calls += [{"id": 10 + i, "tool": "b.meet", "arguments": meet} for i in range(4)]
    code, out, _ = batch(calls, "--parallel", "4")
    assert code == 0 and [o["id"] for o in out] == [c["id"] for c in calls]
    assert [o["content"][0]["text"] for o in out] == ["met"] * 8


def test_policy_and_audit_apply_to_every_call(isolated_dirs):
    write_profile(isolated_dirs, 'deny = ["b.*"]')
    code, out, _ = batch(
        [{"id": 1, "tool": "a.echo", "arguments": {"message": "ok"}}, {"id": 2, "tool": "b.echo", "arguments": {"message": "no"}}]
    )
    assert code == 4 and out[1]["error"]["error"] == "denied", out
    audit = audit_trail(isolated_dirs / "state")
    # servers run concurrently: the records of a and b may interleave
    assert sorted((r["server"], r.get("decision") or r.get("outcome")) for r in audit) == [
        ("a", "allow"),
        ("a", "ok"),
        ("b", "deny"),
    ]
    assert all(r["command"] == "batch" for r in audit)


def test_a_batch_file_and_usage_errors(isolated_dirs, tmp_path):
    write_profile(isolated_dirs)
    calls = tmp_path / "calls.jsonl"
    calls.write_text(json.dumps({"id": 1, "tool": "a.echo", "arguments": {"message": "f"}}) + "\n")
    proc = llmc("call", "--batch", str(calls), timeout=60)
    assert proc.returncode == 0 and json.loads(proc.stdout)["content"][0]["text"] == "f"
    proc = llmc("call", "a.echo", "--batch", str(calls), timeout=60)
    assert proc.returncode == 2 and "--batch" in proc.stderr
    proc = llmc("call", "--batch", str(tmp_path / "missing"), timeout=60)
    assert proc.returncode == 2 and "No such file" in proc.stderr


def test_the_audit_trail_of_a_batch_is_complete_ordered_and_verifiable(isolated_dirs):
    write_profile(isolated_dirs)
    code, out, _ = batch([{"id": i, "tool": "a.echo", "arguments": {"message": str(i)}} for i in range(5)])
    assert code == 0 and len(out) == 5
    audit = audit_trail(isolated_dirs / "state")
    # Every decision is on disk before any call runs; then the outcomes, in the order they happened.
    assert [(r["event"], r["arguments"]["message"]) for r in audit] == [
        *(("decision", str(i)) for i in range(5)),
        *(("outcome", str(i)) for i in range(5)),
    ]
    proc = llmc("audit", "verify", timeout=60)
    assert proc.returncode == 0 and json.loads(proc.stdout)["records"] == 10


def test_a_batch_line_has_the_fields_of_calls_output(isolated_dirs):
    """One output contract: what `llmc call` prints for a call, a batch line prints too (plus its id)."""
    write_profile(isolated_dirs)
    single = llmc("call", "a.add", "a=1", "b=2")
    _, out, _ = batch([{"id": 7, "tool": "a.add", "arguments": {"a": 1, "b": 2}}])
    assert single.returncode == 0, single.stderr
    line = out[0]
    assert set(line) - {"id"} == set(single.json()) and line["id"] == 7
    assert {k: v for k, v in line.items() if k not in ("id", "durationMs")} == {
        k: v for k, v in single.json().items() if k != "durationMs"
    }


def test_arguments_are_checked_against_the_schema_as_call_checks_them(isolated_dirs):
    """A line whose arguments do not fit the tool's inputSchema gets the message `llmc call`
    gives, exit 2, and is neither run nor audited; the others run. --no-validate sends them as
    they are (the server's own error comes back as a tool error)."""
    write_profile(isolated_dirs)
    single = llmc("call", "a.add", "--json", '{"a": "x", "b": 2}')
    assert single.returncode == 2, single.stderr
    code, out, _ = batch(
        [
            {"id": 1, "tool": "a.add", "arguments": {"a": "x", "b": 2}},
            {"id": 2, "tool": "a.add", "arguments": {"a": 1, "b": 2}},
            {"id": 3, "tool": "a.add", "arguments": {"a": 1, "bb": 2}},
        ]
    )
    assert code == 2
    assert out[0]["error"] == {
        "error": "usage",
        "exitCode": 2,
        "message": "line 1: " + single.stderr.strip().removeprefix("llmc: "),
    }
    assert out[1]["structuredContent"] == {"result": 3}
    assert out[2]["error"]["exitCode"] == 2 and "unknown argument 'bb'" in out[2]["error"]["message"]
    audit = audit_trail(isolated_dirs / "state")
    assert [(r["event"], r["arguments"]) for r in audit] == [("decision", {"a": 1, "b": 2}), ("outcome", {"a": 1, "b": 2})]
    code, out, _ = batch([{"id": 1, "tool": "a.add", "arguments": {"a": "x", "b": 2}}], "--no-validate")
    assert code == 1 and out[0]["isError"] is True


def test_a_long_batch_makes_its_hmacs_on_openssl(isolated_dirs, monkeypatch):
    """A batch whose audit records will take the process past lean's switch to OpenSSL's SHA-256
    makes the switch before its first HMAC, not midway (its calls' HMACs all come before the
    first record is sealed): the approval key's pads are then OpenSSL's, and the hashes the same."""
    import hashlib

    from llmc_cli import lean

    write_profile(isolated_dirs)
    monkeypatch.setattr(lean, "_sha256_state", [0, lean._builtin_sha256])
    monkeypatch.setattr(lean, "_hmac_pads", {})
    monkeypatch.setattr(lean, "_OPENSSL_AFTER", 1 << 16)  # the mechanism, in a batch of 82 calls, not 2,600
    n = lean._OPENSSL_AFTER // 800 + 1
    code, out, _ = batch([{"id": i, "tool": "a.echo", "arguments": {"message": str(i)}} for i in range(n)])
    assert code == 0 and len(out) == n
    assert [pads[2] for pads in lean._hmac_pads.values()] == [hashlib.sha256]
    hashes = {r["callHash"] for r in audit_trail(isolated_dirs / "state") if r["event"] == "decision"}
    assert len(hashes) == n
    proc = llmc("audit", "verify", timeout=60)
    assert proc.returncode == 0 and json.loads(proc.stdout)["records"] == 2 * n
