"""Three objects of a batch's hot path are made without their __init__ (a dataclass's or a
class's __init__ through type.__call__ was ~1,500-2,000 instructions each, per call): ToolCall in
services/batch.Batch._route, Decision and Authorization in services/routes.Route.authorize. Each
sets the fields itself, so a field added to one of these classes must be set there too: these
pins fail first and say where."""

from __future__ import annotations

from dataclasses import fields

from llmc_cli.model import ToolCall
from llmc_cli.policy.rules import Decision
from llmc_cli.services.routes import Authorization


def test_toolcall_has_the_fields_batch_route_sets() -> None:
    assert [f.name for f in fields(ToolCall)] == ["server", "tool", "arguments", "call_id"], (
        "services/batch.Batch._route sets a ToolCall's fields itself: set the new field there"
    )


def test_decision_has_the_fields_route_authorize_sets() -> None:
    assert [f.name for f in fields(Decision)] == ["action", "rule", "reason", "call_hash"], (
        "services/routes.Route.authorize sets a Decision's fields itself: set the new field there"
    )


def test_authorization_has_the_slots_route_authorize_sets() -> None:
    assert sorted(Authorization.__slots__) == sorted(
        ("approval", "base", "call", "decision", "durable_at", "masker", "opened", "output_schema", "record")
    ), "services/routes.Route.authorize sets an Authorization's slots itself: set the new one there"
