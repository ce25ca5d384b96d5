"""`llmc call --session`: what the call's own process does and what it leaves to the keeper.

The keeper checks tool arguments against the tool's inputSchema for its callers (so `llmc call`
need not import jsonschema); the messages and exit codes are those of the check in the calling
process, and a call refused as bad input is never decided or audited.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from llmc_cli.errors import UsageError
from llmc_cli.keeper.transport import exchange, validate_in_keeper
from tests.helpers import audit_trail
from tests.session.test_keeper import Keepers, keepers, one_line  # noqa: F401 - the fixture

BAD_INPUT = [
    (["mesage=hi"], "t.echo: unknown argument 'mesage' (did you mean 'message'?)"),
    ([], "t.echo: missing required argument 'message'"),
    (["message:=3"], "t.echo: argument message: expected string, got 3"),
]

# What a call through a keeper must not import (start-up time is most of its cost: issue 21).
NOT_ON_THE_CALL_PATH = (
    "jsonschema",
    "pydantic",
    "concurrent.futures",
    "logging",
    "tomllib",
    "subprocess",
    "llmc_cli.services.batch",
    "llmc_cli.audit.deferred",
    "llmc_cli.audit.postgres",
    "llmc_cli.policy.lint",
    "llmc_cli.cli.complete",
    # issue 34: OpenSSL (hashlib, hmac), shutil (bz2, lzma), getpass, and what launches servers
    "hashlib",
    "hmac",
    "shutil",
    "getpass",
    "llmc_cli.services.sandbox",
    "llmc_cli.server.jail",
    "llmc_cli.mcp.server",
    # issue 34, session 7: `signal` (its enums: interrupts.py uses _signal), queue (the in-memory
    # transport's), TypedDicts and typing's NamedTuple at run time
    "signal",
    "queue",
    "llmc_cli.mcp.transports.memory",
    "llmc_cli.mcp.transports.stdio",
    # session 8: gettext's first lookup imports locale (cli/main.py _help_option)
    "locale",
)
# How many modules a call through a keeper may load, llmc's own and in all (the floor, `import
# click` and a stdlib client of the keeper, loads 113): a new import on this path is a decision.
# +2 in session 14: services/invocation.py and services/request.py, split from services/calls.py
# and services/pipeline.py at the 500-line limit.
# Session 16: +1 of llmc's own (cli/lazy_stdlib.py), fewer in all (187: inspect, ast, dis, tokenize,
# linecache, datetime, uuid's platform are stand-ins, loaded when used, and do not count).
# Session 17: +1 of llmc's own, cli/starting.py, split from cli/common.py so that `tools list`
# starts its server before common's modules load; a call loads both (tests/test_startup_imports.py).
# Session 18: -1, cli/prompt.py, loaded only where a person can be asked (77 and 187 measured).
# Session 18 (round 2): -3, what only help, a failed server, a rate limit or an argument rule needs loads
# with it (tests/test_startup_imports.py; 74 and 184 measured).
MOST_MODULES_ON_THE_CALL_PATH = (74, 186)


def audit_records(state: Path) -> list[dict[str, object]]:
    return audit_trail(state)


def test_bad_arguments_are_refused_with_the_same_message_through_a_keeper(keepers: Keepers) -> None:  # noqa: F811 - the fixture imported above
    keepers.start("check", "-s", "t")
    for args, expected in BAD_INPUT:
        through = keepers.call("t.echo", *args, session="check")
        assert through.returncode == 2 and one_line(through.stderr) == f"llmc: {expected}", through.stderr
        here = keepers.call("t.echo", *args, "-s", "t")  # the profile's server, checked in this process
        assert here.returncode == 2 and one_line(here.stderr) == one_line(through.stderr)
    assert audit_records(keepers.state) == []  # bad input: nothing decided, nothing run
    proc = keepers.call("t.echo", "message=fine", session="check")
    assert proc.returncode == 0 and json.loads(proc.stdout)["content"][0]["text"] == "fine", proc.stderr
    assert [r["event"] for r in audit_records(keepers.state)] == ["decision", "outcome"]


def test_the_keeper_answers_validate_on_its_socket(keepers: Keepers) -> None:  # noqa: F811 - the fixture imported above
    keepers.start("answers", "-s", "t")
    path = str(keepers.sock("answers"))
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    assert validate_in_keeper(path, "answers", {"n": 1}, schema, "t.count") is True
    with pytest.raises(UsageError) as caught:
        validate_in_keeper(path, "answers", {"n": "one"}, schema, "t.count")
    assert caught.value.message == 't.count: argument n: expected integer, got "one"'
    with pytest.raises(UsageError) as refused:  # a malformed question is the caller's error
        exchange(path, {"llmc": "validate", "arguments": [1], "inputSchema": schema}, "answers")
    assert "arguments must be a JSON object" in refused.value.message
    # A keeper that cannot answer (gone, or too old to know `validate`): the caller checks itself.
    assert validate_in_keeper(str(keepers.state / "none.sock"), "none", {"n": 1}, schema, "t.count") is False
    assert validate_in_keeper(path, "answers", {"n": "\ud800"}, schema, "t.count") is False  # cannot be sent


def test_a_call_through_a_keeper_imports_only_what_it_uses(keepers: Keepers) -> None:  # noqa: F811 - the fixture imported above
    keepers.start("lean", "-s", "t")
    code = (
        "import sys\nfrom llmc_cli.cli.main import main\n"
        "try:\n    main(['call', 't.echo', 'message=hi', '--yes', '--session', 'lean'])\n"
        "except SystemExit as exc:\n    assert not exc.code, exc.code\n"
        # a stand-in of cli/lazy_stdlib.py is a module not loaded: only the real ones count
        "real = [m for m, v in sys.modules.items() if type(v).__name__ != 'StandIn']\n"
        f"print('LOADED', [m for m in {NOT_ON_THE_CALL_PATH!r} if m in real], file=sys.stderr)\n"
        "print('COUNT', sum(m.split('.')[0] == 'llmc_cli' for m in real), len(real), file=sys.stderr)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **keepers.env},
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["content"][0]["text"] == "hi"
    assert "LOADED []" in proc.stderr, proc.stderr
    own, every = map(int, proc.stderr.split("COUNT ")[1].split()[:2])
    assert own <= MOST_MODULES_ON_THE_CALL_PATH[0] and every <= MOST_MODULES_ON_THE_CALL_PATH[1], (own, every, proc.stderr)
