"""The SSE parser and the header encoding, on inputs taken from the specifications."""

from __future__ import annotations

import base64

from llmc_cli.mcp.transports.param_headers import header_value
from llmc_cli.mcp.transports.sse_parser import events


def lines(text: str) -> list[str]:
    return text.split("\n")


def test_priming_event_without_data_keeps_its_id_and_retry():
    # The 2025-11-25 priming event (SEP-1699), as the conformance server sends it.
    got = list(events(lines('id: event-1\nretry: 500\ndata: \n\nevent: message\nid: event-2\ndata: {"a":1}\n\n')))
    assert [(e.event, e.data, e.id, e.retry) for e in got] == [
        ("message", "", "event-1", 500),
        ("message", '{"a":1}', "event-2", None),
    ]


def test_multiline_data_comments_and_carried_over_id():
    got = list(events(lines(": keep-alive\n\nid: 7\ndata: one\ndata:two\n\nevent: endpoint\ndata: /messages?s=1\n\n")))
    assert [(e.event, e.data, e.id) for e in got] == [("message", "one\ntwo", "7"), ("endpoint", "/messages?s=1", "7")]


def test_invalid_retry_is_ignored_and_a_final_event_without_blank_line_is_delivered():
    got = list(events(lines("retry: soon\ndata: x\n\ndata: tail")))
    assert [(e.data, e.retry) for e in got] == [("x", None), ("tail", None)]


def test_header_values_use_the_base64_sentinel_when_not_plain_ascii():
    assert header_value("get_weather") == "get_weather"
    assert header_value("file:///projects/myapp/config.json") == "file:///projects/myapp/config.json"
    # The spec's own examples (2026-07-28 streamable-http, Value Encoding).
    assert header_value("Hello, 世界") == "=?base64?SGVsbG8sIOS4lueVjA==?="
    assert header_value(" padded ") == "=?base64?IHBhZGRlZCA=?="
    assert header_value("line1\nline2") == "=?base64?bGluZTEKbGluZTI=?="
    assert header_value("=?base64?literal?=") == "=?base64?" + base64.b64encode(b"=?base64?literal?=").decode() + "?="
