"""The six encodings of a batch call (typical values) by model's encoders, N times; with `bare`:
orjson.dumps + decode alone (what the encoder costs without its safety searches). The two audit
records as the tree's seal encodes them: canonical_json_bytes with the record's arguments as its
foreign part where the tree has it (session 14), else canonical_json and UTF-8 (both are what is
hashed). For
instruction counts, the difference of two callgrind runs (N = 0 and N = 3000) / 3000, as in
bench/reply_instructions.py:

    PYTHONHASHSEED=0 PYTHONPATH=TREE valgrind --tool=callgrind python bench/encode_instructions.py N [bare]
"""

import json
import sys

import orjson

from llmc_cli import model

N = int(sys.argv[1])
bare = len(sys.argv) > 2
lines = [  # two outcome records of a batch, as sealed
    '{"arguments":{"message":"1"},"callHash":"hmac-sha256:99ba181f5e257e2072ea66b7804669c789a2fd74e4b99f225393777ab661fb29","command":"batch","durationMs":9.9,"event":"outcome","host":"vm","outcome":"ok","pid":12149,"prev":"f94214b0a79c9145e2178fa8a2a5cb08b3e76cb923d615862c105eef14eebcc1","profile":"builtin:default","resultBytes":46,"resultSha256":"05c6df5659b0804b15da43f1f1023a914ed457083d27f7ba29f686c8630e0d29","server":"mcp-server-everything","time":"2026-11-29T05:45:20.474Z","tool":"echo","user":"root","hash":"9ce1ad1dd4556e4e0c1625a0e82e1393baf617702c4ce9a4a996901c20a71015"}',
    '{"arguments":{"message":"2"},"callHash":"hmac-sha256:4343cf8d5f106e19b0729932dbf48f6c0fffa6df67582a4cc2c412998b6a8f6e","command":"batch","durationMs":1.0,"event":"outcome","host":"vm","outcome":"ok","pid":12149,"prev":"9ce1ad1dd4556e4e0c1625a0e82e1393baf617702c4ce9a4a996901c20a71015","profile":"builtin:default","resultBytes":46,"resultSha256":"223aa2e3a10c5cc131165a4d25bc59dab033cfe2721d6889195515901a909567","server":"mcp-server-everything","time":"2026-11-29T05:45:20.476Z","tool":"echo","user":"root","hash":"c9c3710c188fe2b0211848cabc224e5465139c498c3b3e429e818aa155845723"}',
]
recs = [json.loads(line) for line in lines]
req = {
    "jsonrpc": "2.0",
    "id": 77,
    "method": "tools/call",
    "params": {"name": "echo", "arguments": {"message": "77"}, "_meta": {"progressToken": 77}},
}
res = {
    "id": 77,
    "server": "mcp-server-everything",
    "tool": "echo",
    "content": [{"type": "text", "text": "Echo: 77"}],
    "isError": False,
    "durationMs": 1.1,
}
args = {"message": "77"}
for _ in range(70):
    model.compact_json(req)
    model.canonical_json(args)  # past the switch to orjson
C, K = model.compact_json, model.canonical_json
to_bytes = getattr(model, "canonical_json_bytes", None)


def R(v: dict) -> bytes:  # an audit record as the seal encodes it for its hash
    if to_bytes is None:
        return K(v).encode("utf-8")
    return to_bytes(v, v.get("arguments"))


if bare:
    o = orjson.OPT_PASSTHROUGH_SUBCLASS | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME
    d = orjson.dumps

    def C(v: object) -> str:
        return d(v, option=o).decode("utf-8")

    def K(v: object) -> str:
        return d(v, option=o | orjson.OPT_SORT_KEYS).decode("utf-8")

    def R(v: dict) -> bytes:
        return d(v, option=o | orjson.OPT_SORT_KEYS)


for _ in range(N):
    C(req)
    K(args)
    K(args)
    R(recs[0])
    R(recs[1])
    C(res)
