"""A caller alone on its stdio connection reads its own reply and takes it as it is
(StdioTransport.pump's `own`), without the matcher's hand-over: every way a server can lie or
wander must end the same there as where the reader thread reads and the matcher hands replies
over (the main thread's calls), and with callers on several threads at once."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

from llmc_cli.errors import ConnectionFailed, LlmcError, ProtocolError, RpcError
from llmc_cli.mcp.client import connect
from llmc_cli.mcp.hooks import ClientHooks
from llmc_cli.model import ServerSpec

MISBEHAVING = str(Path(__file__).resolve().parents[1] / "peers" / "misbehaving_stdio.py")

# the echo's message (tests/peers/misbehaving_stdio.py, mode "faults") -> what the call ends in:
# its text, or the error's class and a part of its message
FAULTS: dict[str, tuple[type[LlmcError] | None, str]] = {
    "plain": (None, "plain"),
    "wrong-id": (ProtocolError, "answered request id 10"),  # (the id sent plus 1000)
    "string-id": (None, "string-id"),
    "not-object": (ProtocolError, "result is not an object"),
    "no-version": (None, "no-version"),
    "deep": (RpcError, "nested more than 128 levels deep"),
    "surrogate": (RpcError, "lone surrogate"),
    "chatty": (None, "chatty"),
    "error": (RpcError, "it broke (code -32000)"),
    "die": (ConnectionFailed, "died mid-reply"),
}
# whose ending does not depend on how many calls are in flight (an id never sent fails the one
# request in flight, and is dropped among several; a string id is taken for the only one's)
SHARED = [name for name in FAULTS if name not in ("wrong-id", "string-id", "die")]


def _faults(hooks: ClientHooks | None = None):
    spec = ServerSpec(name="t", command=(sys.executable, MISBEHAVING, "faults"), timeout=20.0, connect_timeout=60.0)
    return connect(spec, hooks=hooks)


def _outcome(session, message: str) -> tuple[type[LlmcError] | None, str]:
    try:
        return None, session.call_tool("echo", {"message": message})["content"][0]["text"]
    except LlmcError as exc:
        return type(exc), exc.message


def _on_a_worker(work):
    """work() on a thread that is not the main one (the main thread never reads replies itself)."""
    box: list[object] = []
    thread = threading.Thread(target=lambda: box.append(work()))
    thread.start()
    thread.join(timeout=60)
    assert not thread.is_alive() and box
    return box[0]


def _matches(outcome: tuple[type[LlmcError] | None, str], fault: str) -> bool:
    kind, text = FAULTS[fault]
    return outcome[0] is kind and text in outcome[1]


@pytest.mark.parametrize("fault", list(FAULTS))
@pytest.mark.parametrize("where", ["alone on a worker", "on the main thread"])
def test_a_fault_ends_the_same_whoever_reads_the_reply(fault, where):
    """Alone on a worker the caller reads its reply itself; on the main thread the reader thread
    reads it and the matcher hands it over: the same ending either way. A warm-up call first, so
    that the fault's call is a lone caller's second (the reader thread already standing aside)."""
    progress: list[object] = []
    logs: list[object] = []
    with _faults(ClientHooks(on_progress=progress.append, on_log=logs.append)) as s:

        def calls() -> tuple[type[LlmcError] | None, str]:
            assert _outcome(s, "plain") == (None, "plain")
            return _outcome(s, fault)

        outcome = _on_a_worker(calls) if where == "alone on a worker" else calls()
        assert _matches(outcome, fault), outcome
        if fault == "chatty":  # the notifications reached their hooks, the server's ping was answered
            assert progress and logs
            assert _outcome(s, "plain") == (None, "plain")
        elif fault != "die":  # the connection is still good
            assert _on_a_worker(lambda: _outcome(s, "plain")) == (None, "plain")


def test_faults_end_the_same_with_callers_on_several_threads():
    """Four threads calling at once (each sometimes alone, mostly not): every call ends as it
    would alone."""
    with _faults(ClientHooks(on_progress=lambda _p: None, on_log=lambda _p: None)) as s:
        endings: dict[int, list[tuple[type[LlmcError] | None, str]]] = {}

        def calls(k: int) -> None:
            endings[k] = [_outcome(s, SHARED[(k + i) % len(SHARED)]) for i in range(3 * len(SHARED))]

        threads = [threading.Thread(target=calls, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not any(t.is_alive() for t in threads)
    for k, outcomes in endings.items():
        for i, outcome in enumerate(outcomes):
            assert _matches(outcome, SHARED[(k + i) % len(SHARED)]), (k, i, outcome)
    assert len(endings) == 4
