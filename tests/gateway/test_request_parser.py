"""The gateway's request parsing (llhttp through httptools), on bytes in memory: what the parser
frames and what request_parser.py adds on top (head limits, pipelining, the end of a stream)."""

from __future__ import annotations

import io

import pytest

from llmc_cli.gateway.request_parser import MAX_FIELDS, MAX_HEAD_BYTES, BadRequest, RequestHeaders, RequestParser


class Chunks:
    """A client's bytes as reads return them: `sizes` bounds each read, as a socket's arrivals do."""

    def __init__(self, data: bytes, size: int = 1 << 16) -> None:
        self._data = io.BytesIO(data)
        self._size = size
        self.reads = 0

    def read1(self, size: int = -1, /) -> bytes:
        self.reads += 1
        return self._data.read(min(size, self._size))


POST = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\n\r\nhello"


@pytest.mark.parametrize("size", [1, 7, 1 << 16])
def test_pipelined_requests_come_one_at_a_time_whole(size: int) -> None:
    parser = RequestParser(Chunks(POST + b"GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n" + POST, size))
    first = parser.next_request()
    assert first is not None and (first.method, b"".join(first.target), first.version) == ("POST", b"/mcp", "1.1")
    assert parser.body(first) == b"hello" and first.done
    assert parser.served(first)
    second = parser.next_request()
    assert second is not None and (second.method, second.version) == ("GET", "1.0")
    assert RequestHeaders(second.fields).get("connection") == "keep-alive"
    assert parser.served(second)
    third = parser.next_request()
    assert third is not None and parser.body(third) == b"hello" and parser.served(third)
    assert parser.next_request() is None  # the client closed: nothing to answer


def test_a_body_cut_short_is_what_came_and_ends_the_connection() -> None:
    parser = RequestParser(Chunks(POST[:-2]))
    request = parser.next_request()
    assert request is not None and parser.body(request) == b"hel" and not request.done
    assert not parser.served(request)


def test_a_head_cut_short_gets_no_answer() -> None:
    assert RequestParser(Chunks(b"POST /mcp HTTP/1.1\r\nHost: 127.0")).next_request() is None


@pytest.mark.parametrize(
    "head, status",
    [
        (b"GET / HTTP/1.1\r\nX-Long: " + b"a" * MAX_HEAD_BYTES + b"\r\n\r\n", 431),
        (b"GET / HTTP/1.1\r\nX-Long: " + b"a" * (4 * MAX_HEAD_BYTES), 431),  # still coming: refused before the end
        (b"GET / HTTP/1.1\r\n" + b"X-Many: 1\r\n" * (MAX_FIELDS + 1) + b"\r\n", 431),
        (b"GET / HTTP/1.1\nHost: a\n\n", 400),  # bare LF (RFC 9112 2.2 lets a server refuse it)
        (b"GET / HTTP/1.1\r\nHost\t: a\r\n\r\n", 400),
        (b"\x00GET / HTTP/1.1\r\n\r\n", 400),
    ],
    ids=["long-field", "endless-field", "many-fields", "bare-lf", "tab-before-colon", "not-a-method"],
)
def test_a_head_past_the_limits_or_not_http_is_refused(head: bytes, status: int) -> None:
    source = Chunks(head, 4096)
    with pytest.raises(BadRequest) as refused:
        RequestParser(source).next_request()
    assert refused.value.status == status
    assert source.reads <= MAX_HEAD_BYTES // 4096 + 2  # never reads on past the limit


def test_a_bad_request_after_a_good_one_is_refused_in_its_turn() -> None:
    parser = RequestParser(Chunks(POST + b"GET / HTTP/1.1\r\nBad Name: x\r\n\r\n"))
    first = parser.next_request()
    assert first is not None and parser.body(first) == b"hello" and parser.served(first)
    with pytest.raises(BadRequest, match="Invalid header token"):
        parser.next_request()


def test_an_upgrade_request_is_the_connections_last() -> None:
    parser = RequestParser(Chunks(b"GET /mcp HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n" + POST))
    request = parser.next_request()
    assert request is not None and request.method == "GET"
    assert not parser.served(request)  # the bytes after it are another protocol's: never taken for a request


def test_header_values_lose_surrounding_whitespace_and_keep_their_order() -> None:
    parser = RequestParser(Chunks(b"GET / HTTP/1.1\r\nHost:  a  \r\nX-A: 1\r\nx-a: 2\r\n\r\n"))
    request = parser.next_request()
    assert request is not None
    headers = RequestHeaders(request.fields)
    assert headers.get("HOST") == "a" and headers.get_all("X-A") == ["1", "2"] and "x-a" in headers


def test_an_upgrade_request_with_a_body_is_refused() -> None:
    """httptools passes an upgrade request's body on as the new protocol's bytes: refused, not
    served with an empty body."""
    parser = RequestParser(Chunks(b"POST /mcp HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: h2c\r\nContent-Length: 5\r\n\r\nhello"))
    with pytest.raises(BadRequest, match="Upgrade") as refused:
        parser.next_request()
    assert refused.value.status == 400
