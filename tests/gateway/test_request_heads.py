"""A request's header fields as the handlers read them (exchange.Headers): kept as the server
gave them, decoded only when asked for."""

from __future__ import annotations

from llmc_cli.gateway.exchange import Headers


def test_fields_by_name_case_insensitively_the_first_of_repeated_ones() -> None:
    raw = [
        (b"host", b"127.0.0.1:8765"),
        (b"mcp-session-id", b"  abc  "),
        (b"x-twice", b"first"),
        (b"x-twice", b"second"),
        (b"x-latin", "caf\u00e9".encode("latin-1")),
    ]
    headers = Headers(raw)
    assert headers.get("Host") == headers.get("host") == "127.0.0.1:8765"
    assert headers.get("Mcp-Session-Id") == "abc"  # stripped, as the server's value is read
    assert headers.get("X-Twice") == "first"
    assert headers.get("X-Latin") == "caf\u00e9"
    assert headers.get("Origin") is None and headers.get("Origin", "none") == "none"
    assert "MCP-SESSION-ID" in headers and "Origin" not in headers and 3 not in headers
    assert Headers([]).get("Host") is None


def test_any_name_may_be_asked_for() -> None:
    headers = Headers([(b"x-odd", b"1")])
    for i in range(300):  # past the cache of names: each still found, or not
        assert headers.get(f"X-Name-{i}") is None
    assert headers.get("X-ODD") == "1" and headers.get("x-\u00e9") is None
