"""Serve an endpoint over stdio: newline-delimited JSON-RPC on stdin/stdout (transports/stdio.mdx).

Nothing but MCP messages may reach stdout, so the real stdout is kept for the protocol and file
descriptor 1 is pointed at stderr: a stray print (ours, a library's) lands in the log instead
of corrupting the stream.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
from typing import TYPE_CHECKING, BinaryIO

from llmc_cli import interrupts
from llmc_cli.errors import ProtocolError
from llmc_cli.mcp import jsonrpc
from llmc_cli.model import MAX_MESSAGE_DEPTH, JSONObject

if TYPE_CHECKING:
    from llmc_cli.mcp.server import McpServer, Send

MAX_LINE_BYTES = 16 * 1024 * 1024  # one message; longer lines are refused, not buffered forever


def log(message: str) -> None:
    print(f"llmc-workspace: {message}", file=sys.stderr, flush=True)


def run_stdio(endpoint: McpServer, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
    """Read messages until end of input, then close the endpoint (stops its processes).

    SIGTERM and SIGHUP end the server the same way (exit 143 after closing, DESIGN's code for
    both): a client shuts a stdio server down with end of input, then SIGTERM a moment later, and the endpoint
    must still end the process trees it started (they live in their own sessions, out of reach
    of the client's killpg). A signal that arrives while closing is ignored."""
    closing = threading.Event()
    signalled = threading.Event()
    relay: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
    if threading.current_thread() is threading.main_thread():

        def terminate(signum: int, frame: object) -> None:
            if not closing.is_set():
                closing.set()  # once: a second signal must not cut the closing short
                signalled.set()
                raise SystemExit(interrupts.SIGNAL_EXIT_CODES[signum])

        signal.signal(signal.SIGTERM, terminate)
        signal.signal(signal.SIGHUP, terminate)
        relay = interrupts.relayed_to_main_thread((signal.SIGTERM, signal.SIGHUP))  # see there
    if stdout is None:
        stdout = os.fdopen(os.dup(1), "wb", buffering=0)
        os.dup2(2, 1)
        sys.stdout = sys.stderr
    stdin = stdin if stdin is not None else sys.stdin.buffer
    lock = threading.Lock()

    def send(message: JSONObject) -> None:
        data = (jsonrpc.encode(message) + "\n").encode("utf-8")
        with lock:  # whole lines only, whichever thread answers
            try:
                stdout.write(data)
                stdout.flush()
            except (BrokenPipeError, ValueError):
                pass  # the client went away; end of input follows

    endpoint.attach(send)
    endpoint.era_by_first_request = True  # one client on this connection
    try:
        with relay:
            _serve_lines(endpoint, stdin, send, closing)
    finally:
        if signalled.is_set():  # closed (the endpoint stopped its processes): leave with 143
            interrupts.ignore_further()


def _serve_lines(endpoint: McpServer, stdin: BinaryIO, send: Send, closing: threading.Event) -> None:
    try:
        while line := stdin.readline(MAX_LINE_BYTES + 1):
            if len(line) > MAX_LINE_BYTES:
                send(jsonrpc.error(None, jsonrpc.INVALID_REQUEST, "message too long"))
                while line and not line.endswith(b"\n"):  # skip the rest of that line
                    line = stdin.readline(MAX_LINE_BYTES)
                continue
            if not line.strip():
                continue
            for message in _decode(line, send):
                endpoint.handle(message, send)
    except KeyboardInterrupt:
        pass
    finally:
        closing.set()
        endpoint.close()


def _decode(line: bytes, send: Send) -> list[JSONObject]:
    try:
        return jsonrpc.decode(line)
    except ProtocolError:
        try:
            value = json.loads(line)
        except RecursionError:
            send(jsonrpc.error(None, jsonrpc.PARSE_ERROR, f"Parse error: JSON nested more than {MAX_MESSAGE_DEPTH} levels deep"))
            return []
        except ValueError:  # UnicodeDecodeError is a ValueError
            send(jsonrpc.error(None, jsonrpc.PARSE_ERROR, "Parse error: not JSON"))
            return []
    # Valid JSON that is not a valid message: answer each bad one, pass the good ones on.
    good = []
    for item in value if isinstance(value, list) else [value]:
        try:
            jsonrpc.kind_of(item)
            good.append(item)
        except ProtocolError as exc:
            msg_id = item.get("id") if isinstance(item, dict) else None
            send(jsonrpc.error(msg_id, jsonrpc.INVALID_REQUEST, exc.message))
    return good
