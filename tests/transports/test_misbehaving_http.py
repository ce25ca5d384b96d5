"""Servers that misbehave over HTTP (tests/peers/misbehaving_http.py), used through `llmc` the way
a user does: a clear one-line error with the documented exit code, no traceback, no hang."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from typing import Any

import pytest

from tests.helpers import free_port, llmc


def seen(base: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(base + "/stats", timeout=5) as reply:
        return json.load(reply)


def call(base: str, mode: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return llmc("call", "echo", "message=hi", "--yes", "--timeout", "5", *extra, "--url", f"{base}/{mode}/mcp")


def assert_one_line_error(proc: subprocess.CompletedProcess[str], code: int, fragment: str) -> None:
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("llmc: ") and fragment in lines[0], proc.stderr


@pytest.mark.parametrize(
    ("mode", "code", "fragment"),
    [
        ("500", 5, "answered HTTP 500: Internal Server Error: database on fire"),
        ("late500", 5, "answered HTTP 500: Internal Server Error: database on fire"),  # after send() returned
        ("invalid-json", 6, "invalid JSON from server"),
        ("html", 5, "answered text/html instead of JSON or an event stream"),
        ("html400", 5, "answered HTTP 400"),
        ("cut", 5, "closed the event stream of tools/call before replying"),
        ("modern-error", 6, "no common MCP version: the server speaks 2099-01-01; llmc speaks 2026-07-28"),
    ],
)
def test_bad_replies_are_one_line_errors_with_their_exit_code(misbehaving, mode, code, fragment):
    assert_one_line_error(call(misbehaving, mode), code, fragment)


def test_a_server_that_never_answers_times_out_without_hanging(misbehaving):
    before = len(seen(misbehaving))
    # The runner's bound is the check: waiting for the hung POSTs (60 s) would exceed it.
    proc = llmc("call", "echo", "message=hi", "--yes", "--timeout", "2", "--url", f"{misbehaving}/hang/mcp", timeout=30)
    assert_one_line_error(proc, 7, "tools/call")
    # The request was cancelled (the server hangs on that too, which must not delay the exit); the
    # server logs the cancellation when it arrives, so ask until it has (bounded).
    for _ in range(100):
        cancels = [r for r in seen(misbehaving)[before:] if r["rpc"] == "notifications/cancelled"]
        if cancels:
            break
        time.sleep(0.05)
    assert len(cancels) == 1 and cancels[0]["path"] == "/hang/mcp"


def test_a_stream_closed_early_is_resumed_with_last_event_id_after_retry(misbehaving):
    before = len(seen(misbehaving))
    proc = call(misbehaving, "resume")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["content"][0]["text"] == "hi"
    log = [r for r in seen(misbehaving)[before:] if r["path"] == "/resume/mcp"]
    post = next(r for r in log if r["rpc"] == "tools/call")
    resumed = [r for r in log if r["method"] == "GET" and "last-event-id" in r["headers"]]
    assert len(resumed) == 1
    delay = resumed[0]["t"] - post["t"]
    assert 0.25 <= delay <= 0.8, delay  # the server said retry: 300 (ms)
    assert resumed[0]["headers"]["mcp-session-id"] == post["headers"]["mcp-session-id"]


def test_an_expired_session_is_initialized_again_once(misbehaving):
    before = len(seen(misbehaving))
    proc = llmc("tools", "list", "--timeout", "5", "--url", f"{misbehaving}/expire/mcp")
    assert proc.returncode == 0, proc.stderr
    assert [t["name"] for t in json.loads(proc.stdout)["tools"]] == ["echo"]
    log = [r for r in seen(misbehaving)[before:] if r["path"] == "/expire/mcp" and r["method"] == "POST"]
    assert [r["rpc"] for r in log if r["rpc"] in ("initialize", "tools/list")] == [
        "initialize",
        "tools/list",
        "initialize",
        "tools/list",
    ]
    lists = [r for r in log if r["rpc"] == "tools/list"]
    assert lists[0]["headers"]["mcp-session-id"] != lists[1]["headers"]["mcp-session-id"]


def test_custom_headers_on_every_request_never_shown_and_the_session_kept_for_the_next_run(misbehaving):
    before = len(seen(misbehaving))
    proc = llmc("-v", "tools", "list", "--header", "X-Custom: s3cret-value", "--url", f"{misbehaving}/ok/mcp")
    assert proc.returncode == 0, proc.stderr
    log = [r for r in seen(misbehaving)[before:] if r["path"] == "/ok/mcp"]
    assert log and all(r["headers"].get("x-custom") == "s3cret-value" for r in log)
    assert "s3cret-value" not in proc.stdout + proc.stderr
    session = next(r["headers"]["mcp-session-id"] for r in log if r["rpc"] == "tools/list")
    assert [r["headers"]["mcp-protocol-version"] for r in log if r["rpc"] == "tools/list"] == ["2025-11-25"]
    assert any(r["method"] == "GET" for r in log)  # the standalone stream was asked for (405 here)
    # Not ended (no DELETE): the next invocation continues it, without a handshake.
    assert not any(r["method"] == "DELETE" for r in log)
    before = len(seen(misbehaving))
    proc = llmc("tools", "list", "--header", "X-Custom: s3cret-value", "--url", f"{misbehaving}/ok/mcp")
    assert proc.returncode == 0, proc.stderr
    log = [r for r in seen(misbehaving)[before:] if r["path"] == "/ok/mcp" and r["method"] == "POST"]
    assert [r["rpc"] for r in log] == ["tools/list"] and log[0]["headers"]["mcp-session-id"] == session
    assert session not in proc.stdout + proc.stderr
    # `session forget` ends it at the server, with the profile's headers unknown here: best effort.
    before = len(seen(misbehaving))
    assert llmc("session", "forget", "--url", f"{misbehaving}/ok/mcp").returncode == 0
    log = [r for r in seen(misbehaving)[before:] if r["path"] == "/ok/mcp"]
    assert [(r["method"], r["headers"]["mcp-session-id"]) for r in log] == [("DELETE", session)]


def test_http_sse_endpoint_on_another_origin_is_refused(misbehaving):
    proc = llmc("call", "echo", "--yes", "--transport", "sse", "--url", f"{misbehaving}/sse-elsewhere/sse")
    assert_one_line_error(proc, 5, "announced an endpoint on another origin (elsewhere.invalid): refused")


def test_http_sse_without_endpoint_event_times_out(misbehaving):
    proc = llmc(
        "call", "echo", "--yes", "--timeout", "2", "--transport", "sse", "--url", f"{misbehaving}/sse-silent/sse", timeout=30
    )  # the server stays silent for ever: no hang
    assert_one_line_error(proc, 7, "no `endpoint` event within 2s")


def test_nothing_listening_is_a_quick_connection_error():
    proc = llmc("call", "echo", "--yes", "--url", f"http://127.0.0.1:{free_port()}/mcp", timeout=15)  # no retrying
    assert_one_line_error(proc, 5, "cannot reach http://127.0.0.1:")


def test_same_origin_redirects_are_followed_and_others_refused(misbehaving):
    before = len(seen(misbehaving))
    proc = call(misbehaving, "moved", "--header", "X-Custom: s3cret-value")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["content"][0]["text"] == "hi"
    log = seen(misbehaving)[before:]
    # Once moved, later requests go straight to the new address.
    assert [r["rpc"] for r in log if r["path"] == "/moved/mcp"] == ["server/discover"]
    assert all(r["headers"].get("x-custom") == "s3cret-value" for r in log)
    assert_one_line_error(call(misbehaving, "moved-away"), 5, "redirects to another origin (elsewhere.invalid): refused")


def test_a_tool_with_an_invalid_x_mcp_header_is_left_out_of_the_listing(misbehaving):
    proc = llmc("tools", "list", "--url", f"{misbehaving}/modern-tools/mcp")
    assert proc.returncode == 0, proc.stderr
    assert [t["name"] for t in json.loads(proc.stdout)["tools"]] == ["echo"]
