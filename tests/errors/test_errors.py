"""The exception tree in-process: exit codes by name, and errors that cross the session keeper's
socket (to_json in the keeper, from_json in the command) arrive whole."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from llmc_cli import errors
from llmc_cli.audit import AuditError
from llmc_cli.errors import (
    AuthError,
    Cancelled,
    ConfigError,
    ConnectionFailed,
    DriftError,
    ExitCode,
    HttpSessionExpired,
    HttpStatusError,
    InputRequired,
    LlmcError,
    PolicyDenied,
    ProtocolError,
    ProviderError,
    RpcError,
    SessionHoldsServers,
    SkippedAfterFailure,
    TimeoutExpired,
    ToolFailed,
    UsageError,
)
from llmc_cli.store.postgres import StateError

README = Path(__file__).resolve().parents[2] / "README.md"

# (error as raised, the class it must arrive as, exit code)
CROSSING = [
    (ToolFailed("the tool failed"), ToolFailed, ExitCode.TOOL_ERROR),
    (UsageError("bad flag"), UsageError, ExitCode.USAGE),
    (ConfigError("bad profile", path="/p.toml"), ConfigError, ExitCode.CONFIG),
    (PolicyDenied("denied", rule="deny[0]"), PolicyDenied, ExitCode.DENIED),
    (ConnectionFailed("crashed", stderr=["Traceback", "boom"]), ConnectionFailed, ExitCode.CONNECTION),
    (HttpStatusError("HTTP 502", 502, "body"), ConnectionFailed, ExitCode.CONNECTION),
    (HttpSessionExpired("the server ended the session (HTTP 404)"), ConnectionFailed, ExitCode.CONNECTION),
    (ProtocolError("no common version", supported=["2025-11-25"]), ProtocolError, ExitCode.PROTOCOL),
    (RpcError("Method not found", -32601, {"method": "x"}), RpcError, ExitCode.PROTOCOL),
    (TimeoutExpired("no answer within 5s"), TimeoutExpired, ExitCode.TIMEOUT),
    (Cancelled("cancelled by the host"), Cancelled, ExitCode.INTERRUPTED),
    (
        InputRequired(requests={"confirm": {"method": "elicitation/create", "params": {"message": "Run it?"}}}),
        InputRequired,
        ExitCode.TOOL_ERROR,
    ),
    (ProviderError("rate limited"), ProviderError, ExitCode.PROVIDER),
    (AuthError("login required"), AuthError, ExitCode.AUTH),
    (DriftError("tools changed"), DriftError, ExitCode.DRIFT),
    (LlmcError("something"), LlmcError, ExitCode.TOOL_ERROR),
    # Outcomes with their data for a front end to word (issue 34): they cross as their base kind.
    (SessionHoldsServers("work"), UsageError, ExitCode.USAGE),
    (SkippedAfterFailure(), LlmcError, ExitCode.TOOL_ERROR),
    # Subclasses outside errors.py cross as their base class: message, details and exit code kept.
    (AuditError("cannot write the audit log: disk full"), ConfigError, ExitCode.CONFIG),
    (StateError("the state database 127.0.0.1:5432/llmc is down", database="127.0.0.1:5432/llmc"), ConfigError, ExitCode.CONFIG),
]


def test_every_error_class_is_tried_across_the_socket() -> None:
    """A new class in errors.py gets a row above (and a kind from_json knows)."""
    classes = {c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, LlmcError)}
    assert classes <= {type(raised) for raised, _, _ in CROSSING}


@pytest.mark.parametrize("raised, arrives_as, code", CROSSING, ids=lambda v: getattr(v, "kind", None))
def test_an_error_crosses_the_keeper_socket_whole(raised: LlmcError, arrives_as: type, code: ExitCode) -> None:
    wire = json.loads(json.dumps({"llmc": "error", **raised.to_json()}))  # what the keeper sends
    arrived = errors.from_json(wire)
    assert type(arrived) is arrives_as
    assert (arrived.message, arrived.exit_code, arrived.to_json()) == (raised.message, code, raised.to_json())


def test_an_rpc_error_keeps_its_code_and_data() -> None:
    arrived = errors.from_json(RpcError("Invalid params", -32602, {"field": "a"}).to_json())
    assert isinstance(arrived, RpcError) and (arrived.code, arrived.data) == (-32602, {"field": "a"})


@pytest.mark.parametrize(
    "wire, arrives_as",
    [
        ({"llmc": "error", "message": "no kind"}, ConnectionFailed),
        ({"error": "from-a-newer-llmc", "message": "x", "exitCode": 42}, ConnectionFailed),
        ({"error": "rpc_error", "message": "no code"}, RpcError),
        ({"error": "input_required", "message": "no requests"}, InputRequired),
    ],
)
def test_an_unknown_or_partial_error_still_arrives(wire: dict, arrives_as: type) -> None:
    assert type(errors.from_json(wire)) is arrives_as


def test_exit_codes_are_named_once_and_match_the_readme() -> None:
    """Every class's code is an ExitCode, and README documents each number."""
    classes = [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, LlmcError)]
    assert all(isinstance(c.exit_code, ExitCode) for c in classes)
    documented = {int(n) for n in re.findall(r"^\| (\d+) \|", README.read_text(encoding="utf-8"), re.M)}
    assert {int(c) for c in ExitCode} <= documented | {ExitCode.OK}, "document every exit code in README"


def test_an_exit_code_is_its_number_with_a_name() -> None:
    """Each exit code is an int where a number is read (sys.exit, JSON, str, comparisons) and
    names itself."""
    codes = list(ExitCode)
    assert [int(c) for c in codes] == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 130, 143]
    assert len({c.name for c in codes}) == len(codes) and ExitCode.DENIED.name == "DENIED"
    assert ExitCode.DENIED == 4 and hash(ExitCode.DENIED) == hash(4) and isinstance(ExitCode.DENIED, int)
    assert str(ExitCode.TIMEOUT) == "7" and f"{ExitCode.TIMEOUT}" == "7" and json.dumps([ExitCode.AUTH]) == "[9]"
    assert repr(ExitCode.INTERRUPTED) == "<ExitCode.INTERRUPTED: 130>"
    assert {ExitCode.DENIED: "x"}[4] == "x"
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from llmc_cli.errors import ExitCode; sys.exit(ExitCode.TERMINATED)"],
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 143 and proc.stderr == b""
