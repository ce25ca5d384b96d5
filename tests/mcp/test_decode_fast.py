"""jsonrpc.decode reads a server's lines with orjson once the process encodes with it
(model.FAST_LOADS): the messages are exactly json's (the same values, of the same types), and so
are the errors, on lines where orjson reads otherwise (an integer beyond 64 bits becomes a float)
or refuses what json reads (NaN, Infinity, 1e400, a lone surrogate)."""

from __future__ import annotations

import pytest

from llmc_cli import model
from llmc_cli.errors import ProtocolError
from llmc_cli.mcp import jsonrpc

pytest.importorskip("orjson")


def _fast() -> object:
    """model.FAST_LOADS as the process sets it after its first encodings (bounded)."""
    for _ in range(2 * model._FAST_AFTER):
        if model.FAST_LOADS is not None:
            break
        model.compact_json({})
    assert model.FAST_LOADS is not None
    return model.FAST_LOADS


def _reply(value: bytes) -> bytes:
    return b'{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"x"}],"v":' + value + b"}}"


VALUES = [
    b"1",
    b"-0",
    b"-0.0",
    b"1e-7",
    b"1E5",
    b"0.1e1",
    b"5e-324",
    b"1.7976931348623157e308",
    b"18446744073709551615",  # 2**64 - 1: orjson's last integer
    b"18446744073709551616",  # orjson reads this one as a float
    b"-9223372036854775808",
    b"-9223372036854775809",  # likewise
    b"123456789012345678901234567890",
    b"[1, 2.5, null, true, false]",
    b'"1234567890123456789"',  # 19 digits in a string: read by json (the guard's false alarm)
    b'"\\u00e9t\\u00e9 \\ud83d\\ude00"',
    b'"\xc3\xa9t\xc3\xa9"',
    b'"\\ud800"',  # a lone surrogate: orjson refuses it
    b'"x\xed\xa0\x80"',  # one written raw (surrogatepass)
    b"NaN",
    b"-Infinity",
    b"1e400",
    b'{"a": 1, "a": 2}',
    b'{"deep": [[[[[[[[[[1]]]]]]]]]]}',
]
LINES = [_reply(v) for v in VALUES] + [
    b'[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1}}]',
    b'{"jsonrpc":"2.0","id":99999999999999999999,"result":{}}',
    b'{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"bad","data":1e400}}',
    b"not json",
    b'{"jsonrpc":"2.0","id":1,"result":{}',
    b'{"jsonrpc":"1.0","id":1,"result":{}}',
    b"[]",
    b'"just a string"',
    b' {"jsonrpc":"2.0","id":1,"result":{}} ',
    b"\xef\xbb\xbf" + b'{"jsonrpc":"2.0","id":1,"result":{}}',
    b'{"jsonrpc":"2.0","id":1,"result":{"t":"a\x01b"}}',
    b"[" * 200 + b"]" * 200,
]


def _typed(value: object) -> object:
    """A value with each number's type beside it (1 == 1.0 for ==; json's 1 is not orjson's 1.0)."""
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v) for v in value]
    return (type(value).__name__, repr(value))


def _decoded(line: bytes) -> object:
    try:
        return _typed(jsonrpc.decode(line))
    except ProtocolError as exc:
        return ("ProtocolError", exc.message)


@pytest.mark.parametrize("line", LINES, ids=[line[:60].decode("utf-8", "replace") for line in LINES])
def test_a_line_decodes_as_json_reads_it(line: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    fast = _fast()
    with monkeypatch.context() as patch:
        patch.setattr(model, "FAST_LOADS", None)  # json's own path, as before the process encoded much
        expected = _decoded(line)
    with monkeypatch.context() as patch:
        patch.setattr(model, "FAST_LOADS", fast)
        assert _decoded(line) == expected


def test_integers_beyond_64_bits_stay_integers(monkeypatch: pytest.MonkeyPatch) -> None:
    """The guard itself: without it orjson would make these floats (the fault it keeps out)."""
    monkeypatch.setattr(model, "FAST_LOADS", _fast())
    for digits in (b"18446744073709551616", b"-9223372036854775809", b"1" * 40):
        (message,) = jsonrpc.decode(_reply(digits))
        assert message["result"]["v"] == int(digits)  # type: ignore[index,call-overload]
        assert type(message["result"]["v"]) is int  # type: ignore[index,call-overload]
