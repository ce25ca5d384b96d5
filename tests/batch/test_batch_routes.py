"""What authorize concludes once per (server, tool) for a batch's many calls of it (calls.Route:
the policy's decision where it reads nothing of the call, the records' fields but the call's
own) must not stand in for what each call is judged on: an argument rule, a confirmation and
its pre-approved hashes, a rate limit reached mid-batch, a denial by clearance, a secret among
the arguments, a lone surrogate, a tool listed anew. Each batch below has the judgement change
after two calls of the same tool (a Route is made at the second)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmc_cli import services
from llmc_cli.config.profiles import load_profile
from llmc_cli.model import Tool, ToolCall
from llmc_cli.policy import call_hash
from tests.helpers import audit_trail, llmc, sdk_server

KEY = "0123456789abcdef0123456789abcdef0123"  # LLMC_APPROVAL_KEY: the hashes are known here


def write_profile(isolated_dirs: Path, policy: str = "", more: str = "") -> None:
    path = isolated_dirs / "config" / "profiles" / "default.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    server = sdk_server("sdk_server.py")
    path.write_text(f"""
[servers.a]
command = "{server[0]}"
args = ["{server[1]}"]
{more}
[policy]
confirm_destructive = false
{policy}
""")


def batch(isolated_dirs: Path, calls: list[tuple[str, dict[str, object]]], *args: str) -> tuple[int, list[dict], list[dict]]:
    """The batch's exit code, result lines, and decision records."""
    text = "".join(
        json.dumps({"id": i, "tool": tool, "arguments": arguments}) + "\n" for i, (tool, arguments) in enumerate(calls)
    )
    proc = llmc("call", "--batch", "-", *args, stdin=text, env={"LLMC_APPROVAL_KEY": KEY})
    out = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(out) == len(calls), proc.stderr
    decisions = [r for r in audit_trail(isolated_dirs / "state") if r["event"] == "decision"]
    verify = llmc("audit", "verify", env={"LLMC_APPROVAL_KEY": KEY})
    assert verify.returncode == 0, verify.stdout + verify.stderr
    return proc.returncode, out, decisions


def rules(out: list[dict]) -> list[str]:
    """Each line's outcome: "ok", or the rule that denied it."""
    return [o["error"].get("rule", o["error"]["error"]) if "error" in o else "ok" for o in out]


@pytest.mark.parametrize("validate", ["--validate", "--no-validate"])
def test_an_argument_rule_is_judged_for_every_call(isolated_dirs: Path, tmp_path: Path, validate: str) -> None:
    write_profile(isolated_dirs, more="", policy=f'[policy.args."a.echo"]\nmessage = ["{tmp_path}/*"]')
    messages = [f"{tmp_path}/1", f"{tmp_path}/2", "/etc/passwd", f"{tmp_path}/3", "/etc/shadow"]
    code, out, decisions = batch(isolated_dirs, [("a.echo", {"message": m}) for m in messages], validate)
    assert rules(out) == ["ok", "ok", "args.a.echo.message", "ok", "args.a.echo.message"]
    assert [d["decision"] for d in decisions] == ["allow", "allow", "deny", "allow", "deny"]
    assert code == 4


@pytest.mark.parametrize("validate", ["--validate", "--no-validate"])
def test_a_confirmation_reads_each_calls_approval(isolated_dirs: Path, validate: str) -> None:
    approved = call_hash(ToolCall("a", "add", {"a": 3, "b": 3}), KEY.encode())
    write_profile(isolated_dirs, policy=f'confirm = ["a.add"]\napproved = ["{approved}"]')
    calls = [("a.add", {"a": n, "b": n}) for n in (1, 2, 3, 4)]
    code, out, decisions = batch(isolated_dirs, calls, validate)  # no --yes, no terminal: only the approved one runs
    assert rules(out) == ["confirm: a.add", "confirm: a.add", "ok", "confirm: a.add"]
    assert [d["rule"] for d in decisions] == ["confirm: a.add", "confirm: a.add", "approved", "confirm: a.add"]
    assert decisions[2]["callHash"] == approved and code == 4
    code, out, _ = batch(isolated_dirs, calls, "--yes")
    assert rules(out) == ["ok"] * 4 and code == 0


def test_a_rate_limit_reached_mid_batch_denies_the_calls_past_it(isolated_dirs: Path) -> None:
    write_profile(isolated_dirs, policy='tool_calls_per_minute = { "a.echo" = 3 }')
    code, out, decisions = batch(isolated_dirs, [("a.echo", {"message": str(n)}) for n in range(5)])
    assert rules(out) == ["ok", "ok", "ok", "tool:default:a.echo", "tool:default:a.echo"]
    assert [d["decision"] for d in decisions] == ["allow"] * 5  # decided first; the limit stage denies
    outcomes = [r["outcome"] for r in audit_trail(isolated_dirs / "state") if r["event"] == "outcome"]
    assert outcomes == ["ok", "ok", "ok", "denied", "denied"] and code == 4


def test_a_server_above_the_clearance_is_denied_between_allowed_calls(isolated_dirs: Path) -> None:
    server = sdk_server("sdk_server.py")
    more = f'[servers.c]\ncommand = "{server[0]}"\nargs = ["{server[1]}"]\nclassification = "confidential"\n'
    write_profile(isolated_dirs, policy='clearance = "internal"', more=more)
    calls = [("a.echo", {"message": "1"}), ("c.echo", {"message": "2"})] * 3
    code, out, decisions = batch(isolated_dirs, calls)
    assert rules(out) == ["ok", "clearance"] * 3
    assert [(d["server"], d["rule"]) for d in decisions if d["decision"] == "deny"] == [("c", "clearance")] * 3
    assert code == 4


def test_a_read_only_denial_is_recorded_for_every_call(isolated_dirs: Path) -> None:
    """A denial that reads nothing of the call (a Route's decision): each call's own record."""
    write_profile(isolated_dirs, policy='read_only = true\n[policy.hints."a.echo"]\nreadOnly = true')
    calls = [("a.add", {"a": n, "b": 1}) for n in range(3)] + [("a.echo", {"message": str(n)}) for n in range(3)]
    code, out, decisions = batch(isolated_dirs, calls)
    assert rules(out) == ["read_only"] * 3 + ["ok"] * 3 and code == 4
    assert [d["arguments"] for d in decisions[:3]] == [{"a": n, "b": 1} for n in range(3)]
    hashes = [call_hash(ToolCall("a", tool[2:], arguments), KEY.encode()) for tool, arguments in calls]
    assert [d["callHash"] for d in decisions] == hashes
    assert [o["error"]["callHash"] for o in out[:3]] == hashes[:3]


@pytest.mark.parametrize("validate", ["--validate", "--no-validate"])
def test_a_secret_argument_mid_batch_is_masked_in_its_records(isolated_dirs: Path, validate: str) -> None:
    write_profile(isolated_dirs)
    secret = "hunter2-long-secret-value"
    calls = [("a.echo", {"message": "1"}), ("a.echo", {"message": "2"}), ("a.echo", {"message": secret, "token": secret})]
    code, out, decisions = batch(isolated_dirs, [*calls, ("a.echo", {"message": "4"})], validate)
    assert code == 0 and rules(out) == ["ok"] * 4
    assert decisions[2]["arguments"] == {"message": "***", "token": "***"}  # the value masked where it stands too
    assert [d["arguments"]["message"] for d in decisions if d is not decisions[2]] == ["1", "2", "4"]
    assert secret not in (isolated_dirs / "state" / "audit.jsonl").read_text()


@pytest.mark.parametrize("validate", ["--validate", "--no-validate"])
def test_a_lone_surrogate_mid_batch_is_denied(isolated_dirs: Path, validate: str) -> None:
    write_profile(isolated_dirs)
    calls = [("a.echo", {"message": "1"}), ("a.echo", {"message": "2"}), ("a.echo", {"message": "x\ud800"})]
    code, out, decisions = batch(isolated_dirs, [*calls, ("a.echo", {"message": "\u00e9t\u00e9"})], validate)
    assert rules(out) == ["ok", "ok", "invalid_text", "ok"] and code == 4
    assert decisions[2]["arguments"] == {"message": "x\ufffd"} and decisions[3]["arguments"] == {"message": "\u00e9t\u00e9"}


def test_a_tool_listed_anew_is_judged_anew(isolated_dirs: Path) -> None:
    """A Route holds for the very Tool it was made of: the same name listed again with other
    annotations (a new Tool object) is judged by the policy again."""
    path = isolated_dirs / "p.toml"
    path.write_text("[policy]\nread_only = true\n")
    profile = load_profile(str(path))
    with services.open_catalog(profile) as catalog:
        calls = services.open_calls(catalog, profile, command="batch", assume_yes=True)
        read_only = Tool("s", "t", "", {"type": "object"}, annotations={"readOnlyHint": True})
        writes = Tool("s", "t", "", {"type": "object"}, annotations={"readOnlyHint": False})
        first = [calls.authorize(ToolCall("s", "t", {"n": n}), read_only, True).decision for n in range(3)]
        then = [calls.authorize(ToolCall("s", "t", {"n": n}), writes, True).decision for n in range(3)]
        again = calls.authorize(ToolCall("s", "t", {"n": 9}), read_only, True).decision
        calls.close()
    assert [d.action for d in first] == ["allow"] * 3 and again.action == "allow"
    assert [(d.action, d.rule) for d in then] == [("deny", "read_only")] * 3
    assert len({d.call_hash for d in first}) == 3  # each call's own hash


def test_a_float_argument_mid_batch_is_hashed_as_json_writes_it(isolated_dirs: Path) -> None:
    """A Route hashes a call of text, integers, booleans and nulls as orjson encodes it; a float
    (1e-07 in json's text, 1e-7 in orjson's) is hashed over json's text, as call_hash does: past
    the process's 64th encoding, when the encoders are orjson's."""
    write_profile(isolated_dirs)
    calls = [("a.echo", {"message": str(n)}) for n in range(70)]
    calls += [("a.echo", {"message": "f", "x": 1e-07}), ("a.echo", {"message": "g", "y": 0.5, "z": 10**20})]
    _, _, decisions = batch(isolated_dirs, calls, "--no-validate")
    hashes = [call_hash(ToolCall("a", tool[2:], arguments), KEY.encode()) for tool, arguments in calls]
    assert [d["callHash"] for d in decisions] == hashes
    assert decisions[70]["arguments"] == {"message": "f", "x": 1e-07}


def test_a_long_batch_reads_its_lines_as_json_does(isolated_dirs: Path) -> None:
    """Past 64 lines a batch reads them with orjson where its value is json's: an integer past
    64 bits (orjson's float) anywhere sends every line to json; NaN, 1e400 and a lone
    surrogate's escape (orjson refuses them) are read by json too."""
    write_profile(isolated_dirs)
    ids = [12345678901234567890123, 1.5e-07, -0.0, "\u00e9t\u00e9", 2**63, "x" * 30]
    lines = [f'{{"id": {json.dumps(i)}, "tool": "a.echo", "arguments": {{"message": "m"}}}}' for i in ids]
    lines += ['{"id": NaN, "tool": "a.echo", "arguments": {"message": "nan"}}']
    lines += ['{"id": 1e400, "tool": "a.echo", "arguments": {"message": "inf"}}']
    lines += ['{"id": "s\\ud800", "tool": "a.echo", "arguments": {"message": "sur"}}']
    lines += [json.dumps({"id": n, "tool": "a.echo", "arguments": {"message": str(n)}}) for n in range(64)]
    for text in ("\n".join(lines), "\n".join(lines[1:])):  # with the long integer, and without it
        proc = llmc("call", "--batch", "-", stdin=text + "\n", env={"LLMC_APPROVAL_KEY": KEY})
        assert proc.returncode == 0, proc.stderr
        got = [json.loads(line)["id"] for line in proc.stdout.splitlines()]
        want = [json.loads(line)["id"] for line in text.splitlines()]
        assert len(got) == len(want)
        assert [repr(i) for i in got] == [repr(i) for i in want]  # types too: 1e400 is inf in both, NaN is nan


def test_an_item_given_its_call_is_decided_and_run(isolated_dirs: Path) -> None:
    """A BatchItem made with its call (routed by its maker, no name to route) is decided and run
    like a line's: the batch's lanes take it in, none is left without a decision."""
    write_profile(isolated_dirs)
    profile = load_profile(str(isolated_dirs / "config" / "profiles" / "default.toml"))
    with services.open_catalog(profile) as catalog:
        pipeline = services.open_calls(catalog, profile, command="batch", assume_yes=True)
        items = [
            services.BatchItem(0, 0, "a.echo", {"message": "named"}),
            services.BatchItem(1, 1, call=ToolCall("a", "echo", {"message": "given"})),
            services.BatchItem(2, 2, call=ToolCall("a", "echo", {"message": "given again"})),
        ]
        services.run_batch(pipeline, items)
        pipeline.close()
    assert [item.error for item in items] == [None] * 3
    assert ["given again" in item.result.text for item in items if item.result is not None] == [False, False, True]
    assert [r["decision"] for r in audit_trail(isolated_dirs / "state") if r["event"] == "decision"] == ["allow"] * 3
