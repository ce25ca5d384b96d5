"""The reply path in process: a reply line -> decoded -> delivered -> resolved -> awaited, as a
stdio session does it for each call (no server: the line is handed to StdioTransport._handle).
For instruction counts independent of the load, the difference of two callgrind runs:

    PYTHONHASHSEED=0 PYTHONPATH=TREE valgrind --tool=callgrind python bench/reply_instructions.py 0
    PYTHONHASHSEED=0 PYTHONPATH=TREE valgrind --tool=callgrind python bench/reply_instructions.py 3000

(Collected of the second minus the first) / 3000 = instructions a reply. Without valgrind it
prints the thread CPU a reply."""

import sys
import time

from llmc_cli import model
from llmc_cli.mcp.session import ClientSession
from llmc_cli.mcp.transports.stdio import StdioTransport

N = int(sys.argv[1])
for _ in range(70):
    model.compact_json({"x": 1})  # past the switch to orjson, as a batch is (its replies read by orjson where it reads as json)
t = StdioTransport(["true"])
s = ClientSession(t, name="x")
t._deliver, t._closed = s._on_message, s._on_closed


def one():
    rid = s._new_id()
    fut = s._inflight.open(rid)
    t._handle(b'{"result":{"content":[{"type":"text","text":"Echo: %d"}]},"jsonrpc":"2.0","id":%d}' % (rid, rid))
    msg = s._inflight.wait(rid, fut, 60.0)
    s._inflight.close(rid)
    return msg


for _ in range(200):
    one()
t0 = time.thread_time()
for _ in range(N):
    one()
if N:
    print(f"{(time.thread_time() - t0) / N * 1e9:.0f} ns a reply", file=sys.stderr)
