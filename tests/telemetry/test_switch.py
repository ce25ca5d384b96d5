"""Turning telemetry on and off, and what configures it: nothing imported or sent while off; the
three switches; the standard OTEL_* variables (sampler, resource); the missing extra; a collector
that is down or silent never holds a command nor changes its exit code."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from tests.helpers import llmc, llmc_process
from tests.telemetry.conftest import SERVER, otel_env, profile


def test_nothing_is_sent_and_nothing_imported_when_off(isolated_dirs, receiver):
    """A [telemetry] table that does not enable it, no flag, no LLMC_OTEL: no OpenTelemetry module
    is even imported (the same entry point, in one process), the server gets no trace context,
    and the collector hears nothing."""
    profile(isolated_dirs, "enabled = false\naudit_logs = true\ncapture_content = true")
    script = textwrap.dedent("""
        import sys
        from llmc_cli.cli.main import main
        try:
            main(["call", "sdk.trace_context"])
        except SystemExit as exc:
            code = exc.code
        print(sorted(m for m in sys.modules if m.startswith("opentelemetry")), file=sys.stderr)
    """)
    env = {k: v for k, v in os.environ.items() if k != "LLMC_OTEL"}
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env={**env, **otel_env(receiver)}
    )
    assert json.loads(proc.stdout)["structuredContent"] == {}, proc.stderr  # no traceparent in _meta
    assert proc.stderr.strip().splitlines()[-1] == "[]", proc.stderr
    # No wait needed: an OTLP exporter waits for the receiver's reply, which comes after the
    # receiver stored the data, so whatever was sent was stored before the command exited.
    assert not receiver.got.headers and not receiver.got.spans and not receiver.got.points


def test_the_sampler_and_the_resource_come_from_the_standard_variables(isolated_dirs, receiver):
    """OTEL_TRACES_SAMPLER=always_off: no span is exported, yet the server still gets the
    context (not sampled) so its own tracing agrees; OTEL_RESOURCE_ATTRIBUTES names the
    service when OTEL_SERVICE_NAME is not set."""
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_TRACES_SAMPLER": "always_off",
        "OTEL_RESOURCE_ATTRIBUTES": "service.name=nightly-sync,deployment.environment.name=ci",
    }
    proc = llmc("--otel", "call", "--stdio", SERVER, "trace_context", env=env)
    assert proc.returncode == 0, proc.stderr
    flags = int(proc.json()["structuredContent"]["traceparent"].rsplit("-", 1)[1], 16)
    assert flags & 1 == 0  # W3C trace-flags: the sampled bit is clear
    got = receiver.got  # the command flushed before it exited (see above): no waiting
    assert got.points and not got.spans
    assert {r.get("service.name") for r in got.resources} == {"nightly-sync"}
    assert {r.get("deployment.environment.name") for r in got.resources} == {"ci"}
    assert all(r.get("service.version") for r in got.resources)


@pytest.mark.parametrize("switch", ["flag", "env", "profile"])
def test_enabled_without_the_extra_is_one_line_naming_it(isolated_dirs, tmp_path, switch):
    """Each way of turning telemetry on, with OpenTelemetry not importable (a module of that name
    that is not the SDK shadows it: an install without the otel extra)."""
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "opentelemetry.py").write_text("# not the SDK: stands for an install without the otel extra\n")
    profile(isolated_dirs, "enabled = true" if switch == "profile" else "")
    flag = ("--otel",) if switch == "flag" else ()
    env = {"PYTHONPATH": str(shadow), **({"LLMC_OTEL": "1"} if switch == "env" else {})}
    proc = llmc_process(*flag, "call", "sdk.add", "a=1", "b=2", env=env)  # process: PYTHONPATH acts at start-up
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "llmc-cli[otel]" in proc.stderr, proc.stderr


def test_another_otlp_protocol_is_a_configuration_error(isolated_dirs):
    proc = llmc("--otel", "call", "--stdio", SERVER, "add", "a=1", "b=2", env={"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "grpc"})
    assert proc.returncode == 3
    assert proc.stderr.strip().count("\n") == 0 and "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL=grpc" in proc.stderr


@pytest.mark.parametrize("collector", ["silent", "down"])
def test_a_collector_that_is_down_or_silent_costs_at_most_the_flush_bound(isolated_dirs, collector):
    """silent: accepts connections and never replies; down: refuses them. The command's output
    and exit code (1 here: the tool reported an error) are unchanged, one warning line says
    telemetry was dropped, and the command ends within its bound."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    if collector == "silent":
        listener.listen(16)
        threading.Thread(target=accept, daemon=True).start()
    else:
        listener.close()  # nothing listens on the port: connections are refused
    try:
        profile(isolated_dirs, "enabled = true\nflush_timeout = 1")
        started = time.monotonic()
        proc = llmc(
            "call", "sdk.fail", "reason=nope", timeout=60, env={"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}"}
        )
        elapsed = time.monotonic() - started
    finally:
        stop.set()
        for conn in held:
            conn.close()
        listener.close()
    assert proc.returncode == 1 and proc.json()["isError"] is True, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if "telemetry:" in line]
    assert len(warnings) == 1 and "dropped" in warnings[0] and str(port) in warnings[0], proc.stderr
    if collector == "silent":
        assert held  # the exporter did connect: the bound, not luck, ended the wait
    # A generous ceiling, not a timing measurement (bench/otel_bench.py measures): the bound is
    # 1 s of flush; the rest is start-up on a loaded 2-core machine. Unbounded would be minutes.
    assert elapsed < 30, elapsed
