"""services/calls.py masks a host's identity (an audit record's "client") once per identity and
masker: the same masked copy while both are the very objects, and afresh when either changes (a
call with secret arguments masks with a wider masker; a new handshake brings a new identity)."""

from __future__ import annotations

from llmc_cli.config.secrets import Masker
from llmc_cli.services.calls import masked


def record(client: object) -> dict[str, object]:
    return {"event": "decision", "server": "up", "tool": "echo", "arguments": {}, "client": client}


def test_the_same_identity_and_masker_give_the_same_copy() -> None:
    client = {"name": "host-s3cr3t-value", "version": "1", "transport": "http"}
    masker = Masker(["s3cr3t-value"])
    first = masked(record(client), masker)["client"]  # type: ignore[arg-type]
    assert first == {"name": "host-***", "version": "1", "transport": "http"}
    assert masked(record(client), masker)["client"] is first  # type: ignore[arg-type]
    assert client["name"] == "host-s3cr3t-value"  # the identity itself is not touched


def test_a_wider_masker_masks_the_same_identity_afresh() -> None:
    client = {"name": "agent-0123456789", "version": "2"}
    environment = Masker(["unrelated-secret"])
    assert masked(record(client), environment)["client"] == client  # type: ignore[arg-type]
    widened = environment.with_arguments({"apiKey": "0123456789"})  # the call's secret argument
    assert masked(record(client), widened)["client"] == {"name": "agent-***", "version": "2"}  # type: ignore[arg-type]
    assert masked(record(client), environment)["client"] == client  # type: ignore[arg-type]


def test_a_new_identity_object_is_masked_afresh() -> None:
    masker = Masker(["topsecret-1"])
    assert masked(record({"name": "a"}), masker)["client"] == {"name": "a"}  # type: ignore[arg-type]
    assert masked(record({"name": "topsecret-1"}), masker)["client"] == {"name": "***"}  # type: ignore[arg-type]
    other = {"name": "x topsecret-1 y"}
    assert masked(record(other), masker)["client"] == {"name": "x *** y"}  # type: ignore[arg-type]
