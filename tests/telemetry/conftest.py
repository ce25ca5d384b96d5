"""What the telemetry tests share: the OTLP receiver fixture, the exporter environment, and a
profile with the SDK test server (whose trace_context tool returns the W3C keys of its _meta)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import profile_file, sdk_server
from tests.telemetry.receiver import Receiver

SERVER = " ".join(sdk_server("sdk_server.py"))


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as r:
        yield r


def otel_env(receiver: Receiver, **extra: str) -> dict[str, str]:
    return {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_SERVICE_NAME": "llmc-test", **extra}


def profile(isolated_dirs: Path, telemetry: str = "", extra: str = "") -> None:
    profile_file(
        isolated_dirs / "config",
        f"""
[servers.sdk]
command = "{sys.executable}"
args = ["{sdk_server("sdk_server.py")[1]}"]
{extra}
[telemetry]
{telemetry}
""",
    )
