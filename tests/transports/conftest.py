"""Real HTTP servers for the transport tests, one process per module, on free loopback ports."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests.helpers import NODE_BIN, PEERS, free_port, node_tool, wait_listening


@contextmanager
def http_server(argv: list[str], port: int, env: dict[str, str] | None = None) -> Iterator[str]:
    """Start a server, wait (bounded) until its port accepts connections, stop it afterwards."""
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "PATH": f"{NODE_BIN}{os.pathsep}{os.environ['PATH']}", **(env or {})},
        start_new_session=True,
    )
    try:
        wait_listening(proc, port, argv)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        if proc.stderr:
            proc.stderr.close()


def sdk(mode: str, *flags: str) -> Iterator[str]:
    port = free_port()
    with http_server([sys.executable, str(PEERS / "sdk_server.py"), mode, "--port", str(port), *flags], port) as base:
        yield base


@pytest.fixture(scope="module")
def sdk_stateful() -> Iterator[str]:
    """SDK Streamable HTTP server, sessions, SSE replies: URL of its endpoint."""
    for base in sdk("streamable-http"):
        yield base + "/mcp"


@pytest.fixture(scope="module")
def sdk_stateless() -> Iterator[str]:
    for base in sdk("streamable-http", "--stateless"):
        yield base + "/mcp"


@pytest.fixture(scope="module")
def sdk_json() -> Iterator[str]:
    for base in sdk("streamable-http", "--json"):
        yield base + "/mcp"


@pytest.fixture(scope="module")
def sdk_legacy() -> Iterator[str]:
    """SDK Streamable HTTP server that only speaks the initialize era: Mcp-Session-Id sessions."""
    for base in sdk("streamable-http", "--legacy"):
        yield base + "/mcp"


@pytest.fixture(scope="module")
def sdk_sse() -> Iterator[str]:
    for base in sdk("sse"):
        yield base + "/sse"


def everything(mode: str) -> Iterator[str]:
    port = free_port()
    with http_server([node_tool("mcp-server-everything"), mode], port, env={"PORT": str(port)}) as base:
        yield base


@pytest.fixture(scope="module")
def everything_sse() -> Iterator[str]:
    for base in everything("sse"):
        yield base + "/sse"


@pytest.fixture(scope="module")
def everything_http() -> Iterator[str]:
    for base in everything("streamableHttp"):
        yield base + "/mcp"


@pytest.fixture(scope="module")
def misbehaving() -> Iterator[str]:
    """Base URL of tests/peers/misbehaving_http.py; the first path segment picks a misbehaviour."""
    port = free_port()
    with http_server([sys.executable, str(PEERS / "misbehaving_http.py"), "--port", str(port)], port) as base:
        yield base


@pytest.fixture(scope="module")
def sdk_param_headers() -> Iterator[str]:
    port = free_port()
    with http_server([sys.executable, str(PEERS / "sdk_param_headers.py"), "--port", str(port)], port) as base:
        yield base + "/mcp"
