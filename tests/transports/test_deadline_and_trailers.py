"""Issue 35: the deadline is the call's, whatever bytes arrive; trailers have a bound.

An HTTP upstream (tests/peers/misbehaving_http.py, raw bytes on its socket) drips its reply one
byte every half second: its head, its JSON body, or comment lines of an event stream. A call
with `timeout = 3` ends at about 3 s with exit 7, through `llmc call` and through the gateway
(which reads a reply on the host's own thread). An upstream whose chunked reply ends in an
endless trailer section (one field that never ends, or field after field) fails the call at
once (not at the timeout), as an over-long head does."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.helpers import llmc

TIMEOUT = 3
BOUND = TIMEOUT + 6  # start-up, the handshake and a loaded machine; the drip itself lasts 120 s


@pytest.mark.parametrize("mode", ["drip-json", "drip-head", "drip-sse"])
def test_the_deadline_is_the_calls_whatever_bytes_arrive(misbehaving: str, mode: str) -> None:
    started = time.monotonic()
    proc = llmc(
        "call", "echo", "message=hi", "--yes", "--timeout", str(TIMEOUT), "--url", f"{misbehaving}/{mode}/mcp", timeout=60
    )
    took = time.monotonic() - started
    assert proc.returncode == 7, proc.stderr
    assert took < BOUND, took


@pytest.mark.e2e  # a gateway process
def test_the_gateway_keeps_the_upstreams_timeout_whatever_bytes_arrive(misbehaving: str, tmp_path: Path) -> None:
    from tests.gateway.test_http import start, stop

    tables = "".join(
        f'[servers.{mode.replace("-", "_")}]\nurl = "{misbehaving}/{mode}/mcp"\ntimeout = {TIMEOUT}\n'
        for mode in ("drip-json", "drip-head", "drip-sse", "endless-trailer", "many-trailers")
    )
    profile = tmp_path / "gw.toml"
    profile.write_text(tables + '\n[policy.hints."*"]\nreadOnly = true\n', encoding="utf-8")
    running = start(profile)
    try:
        listed = llmc("tools", "list", "--url", running.url, timeout=120)  # the upstreams' handshakes, before the clock
        assert listed.returncode == 0, listed.stderr
        for server in ("drip_json", "drip_head", "drip_sse", "endless_trailer", "many_trailers"):
            started = time.monotonic()
            proc = llmc("call", "--url", running.url, "--yes", f"{server}.echo", "message=hi", timeout=120)
            took = time.monotonic() - started
            assert proc.returncode != 0, (server, proc.stdout)
            assert took < BOUND, (server, took, proc.stderr)
    finally:
        stop(running)


@pytest.mark.parametrize(("mode", "fragment"), [("endless-trailer", "trailer section"), ("many-trailers", "trailer fields")])
def test_trailers_have_a_bound(misbehaving: str, mode: str, fragment: str) -> None:
    started = time.monotonic()
    proc = llmc("call", "echo", "message=hi", "--yes", "--timeout", "60", "--url", f"{misbehaving}/{mode}/mcp", timeout=90)
    took = time.monotonic() - started
    assert proc.returncode == 5 and fragment in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert took < 20, took  # at once, not at the 60 s timeout
