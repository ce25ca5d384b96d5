"""Issue 35, Low: a secret inside a tool's NAME (tests/peers/secret_named.py puts the
SERVICE_API_KEY it was given into one) does not leave in span names or attributes."""

from __future__ import annotations

import json
import sys

from tests.helpers import PEERS, llmc, profile_file
from tests.telemetry.conftest import otel_env

SECRET = "s3cr3t-value-for-the-test"


def test_a_secret_inside_a_tools_name_is_masked_on_spans(isolated_dirs, receiver):
    profile_file(
        isolated_dirs / "config",
        f"[servers.s]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(PEERS / 'secret_named.py'))}]\n"
        'env = { SERVICE_API_KEY = "${SERVICE_API_KEY}" }\n\n[telemetry]\nenabled = true\n',
    )
    proc = llmc("call", f"s.lookup_{SECRET}", "query=x", env=otel_env(receiver, SERVICE_API_KEY=SECRET))
    assert proc.returncode == 0, proc.stderr
    got = receiver.got
    assert got.wait_for(lambda g: g.named("tools/call lookup_***"))
    assert SECRET not in json.dumps(got.spans), "a span carries the secret"
