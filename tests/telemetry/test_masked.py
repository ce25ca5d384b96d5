"""What reaches an OpenTelemetry collector is masked as the audit is: a server that quotes back a
secret argument and a secret the profile gave it (in a JSON-RPC error message, its data, a tool
error) leaves neither in any span name, attribute, status description or event, nor in any log
record (audit_results on: the log records carry results) — with capture_content off and on, from the CLI and through the gateway."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.audit.test_quoted_secrets import PASSWORD, TOKEN, spellings
from tests.helpers import llmc, llmc_executable, profile_file, sdk_server
from tests.telemetry.conftest import otel_env
from tests.telemetry.receiver import Receiver


def quoting_profile(isolated_dirs: Path, capture: bool) -> Path:
    command, script = sdk_server("quoting_server.py")
    return profile_file(
        isolated_dirs / "config",
        f"""audit_results = true
[servers.q]
command = "{command}"
args = ["{script}"]
env = {{ API_TOKEN = "${{UPSTREAM_CRED}}" }}
[policy]
confirm_destructive = false
[telemetry]
enabled = true
audit_logs = true
capture_content = {str(capture).lower()}
""",
    )


def assert_nothing_secret(received: Receiver) -> str:
    with received.got.lock:
        text = json.dumps({"spans": received.got.spans, "logs": received.got.logs}, default=str)
    for secret in spellings(PASSWORD) | spellings(TOKEN):
        assert secret not in text, (secret, text)
    return text


@pytest.mark.parametrize("capture", [False, True], ids=["content-off", "content-on"])
@pytest.mark.parametrize("fail_with", ["rpc", "tool"])
def test_spans_and_logs_carry_no_secret_a_server_quoted(isolated_dirs, receiver, capture, fail_with):
    quoting_profile(isolated_dirs, capture)
    arguments = json.dumps({"user": "ann", "password": PASSWORD, "fail_with": fail_with})
    proc = llmc("call", "q.login", "--json", arguments, env=otel_env(receiver, UPSTREAM_CRED=TOKEN))
    assert proc.returncode == (6 if fail_with == "rpc" else 1), proc.stderr
    got = receiver.got
    assert got.wait_for(lambda g: g.named("tools/call login") and g.named("llmc call") and len(g.logs) >= 2)
    span = got.named("tools/call login")[0]
    assert span["status"] == "error"
    if fail_with == "rpc":  # the message is kept, masked
        assert "login failed for password *** (token ***)" in span["statusMessage"]
    assert_nothing_secret(receiver)


def test_through_the_gateway_no_span_carries_a_secret(isolated_dirs, receiver):
    path = quoting_profile(isolated_dirs, capture=False)
    gateway = (
        f"env OTEL_EXPORTER_OTLP_ENDPOINT={receiver.endpoint} LLMC_STATE_DIR={isolated_dirs / 'gw-state'} "
        f"UPSTREAM_CRED={TOKEN} {llmc_executable()} --otel serve -p {path}"
    )
    arguments = json.dumps({"user": "ann", "password": PASSWORD, "fail_with": "rpc"})
    proc = llmc("call", "--stdio", gateway, "q.login", "--json", arguments, env=otel_env(receiver, LLMC_OTEL="1"))
    assert proc.returncode == 6, proc.stderr
    got = receiver.got
    assert got.wait_for(
        lambda g: {s["kind"] for s in g.named("tools/call q.login")} == {"client", "server"} and g.named("tools/call login")
    )
    served = next(s for s in got.named("tools/call q.login") if s["kind"] == "server")
    assert served["status"] == "error" and "login failed for password ***" in served["statusMessage"]
    # what the host got back is masked as well: the gateway's operator's secret stays with it
    assert TOKEN not in proc.stderr and "(token ***)" in proc.stderr
    assert_nothing_secret(receiver)
