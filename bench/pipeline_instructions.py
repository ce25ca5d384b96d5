"""The services layer of a batch's call in process: each call routed, validated and authorized
(services/calls.py), the decisions recorded at once, then each call executed through the
pipeline's stages (limit, run, inspect, record: services/pipeline.py) and its result line's
fields made, as services/batch.py does. No server and no audit chain: the session answers at
once with an echo's result, and the records go to a sink that keeps nothing, so what is counted
is the services layer's own Python (its calls into model.py and config/secrets.py included).
For instruction counts independent of the load, the difference of two callgrind runs:

    PYTHONHASHSEED=0 PYTHONPATH=TREE valgrind --tool=callgrind python bench/pipeline_instructions.py 0
    PYTHONHASHSEED=0 PYTHONPATH=TREE valgrind --tool=callgrind python bench/pipeline_instructions.py 3000

(Collected of the second minus the first) / 3000 = instructions a call. Without valgrind it
prints the thread CPU a call. Works on trees before `cleared` (authorize asks again there)."""

import inspect
import os
import sys
import tempfile
import time
import typing

os.environ.setdefault("LLMC_STATE_DIR", tempfile.mkdtemp(prefix="llmc-bench-"))
os.environ.setdefault("LLMC_CONFIG_DIR", os.environ["LLMC_STATE_DIR"])

from llmc_cli import services
from llmc_cli.config.profiles import LoadedProfile
from llmc_cli.config.schema import Profile
from llmc_cli.model import Tool, ToolCall

N = int(sys.argv[1])
TOOL = Tool(
    server="ev",
    name="echo",
    description="Echoes back the input",
    input_schema={"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]},
)


class Session:
    def call_tool(self, name, arguments, timeout=None, meta=None):
        return {"content": [{"type": "text", "text": f"Echo: {arguments['message']}"}]}


class Catalog:
    """What the pipeline asks of a catalog on this path."""

    keeper = None
    specs: typing.ClassVar[dict] = {}
    _session = Session()

    def session(self, server):
        return self._session

    def require_tool(self, server, name):
        return TOOL

    find_tool = require_tool


class Sink:
    """An audit sink that keeps nothing (the audit's own cost is audit/'s)."""

    def record(self, record, *, before_action):
        pass

    def record_before_actions(self, records):
        pass

    def flush(self):
        pass

    def mark(self):
        return 0


profile = LoadedProfile("bench", None, Profile())
pipeline = services.open_calls(Catalog(), profile, command="batch", assume_yes=True)
pipeline.context.audit = pipeline._log = Sink()
CLEARED = "cleared" in inspect.signature(pipeline.authorize).parameters


def batch(n, base=0):
    calls = []
    for i in range(base, base + n):
        request = services.ToolRequest("echo", {"message": str(i)})
        calls.append(ToolCall("ev", request.name, request.arguments or {}))
    authorized = []
    for call in calls:
        pipeline.validate(call, TOOL, here=True)
        authorized.append(pipeline.authorize(call, TOOL, True) if CLEARED else pipeline.authorize(call, TOOL))
    pipeline.decide(authorized)
    return [pipeline.execute(a).result for a in authorized]


batch(200, 1_000_000)  # warm: every lazy import and cache made
t0 = time.thread_time()
batch(N)
if N:
    print(f"{(time.thread_time() - t0) / N * 1e9:.0f} ns a call", file=sys.stderr)
