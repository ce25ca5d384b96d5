"""2026-07-28 `x-mcp-header`: tool parameters mirrored into `Mcp-Param-*` headers, checked by the
official SDK server (it answers HeaderMismatch when a header is missing or wrong)."""

from __future__ import annotations

import pytest

from llmc_cli.errors import RpcError
from llmc_cli.mcp import jsonrpc
from llmc_cli.mcp.client import connect
from llmc_cli.mcp.transports.param_headers import annotated_parameters, mirrored_arguments
from llmc_cli.model import ServerSpec


def test_mirrored_parameters_satisfy_the_sdk_server(sdk_param_headers):
    with connect(ServerSpec("ph", url=sdk_param_headers, timeout=20)) as session:
        assert session.era == "modern"
        # Before tools/list the client cannot know the annotations: the server refuses the call.
        with pytest.raises(RpcError) as info:
            session.call_tool("run_query", {"region": "us-west1", "query": "q"})
        assert info.value.code == jsonrpc.HEADER_MISMATCH
        assert [t["name"] for t in session.list_tools()] == ["run_query"]
        result = session.call_tool("run_query", {"region": "eu-wëst", "query": "select 1", "dry_run": True})
        assert result["content"][0]["text"] == "eu-wëst: select 1 (dry run)"
        assert session.call_tool("run_query", {"region": " padded ", "query": "q"})["content"][0]["text"] == " padded : q"


def test_annotations_are_found_on_plain_property_chains_only():
    schema = {
        "type": "object",
        "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "opts": {"type": "object", "properties": {"limit": {"type": "integer", "x-mcp-header": "Limit"}}},
            "note": {"type": "string", "default": {"x-mcp-header": "data, not an annotation"}},
        },
    }
    assert annotated_parameters(schema) == {("region",): "Region", ("opts", "limit"): "Limit"}
    assert mirrored_arguments(annotated_parameters(schema), {"region": "Hello, 世界", "opts": {"limit": 5}}) == {
        "Mcp-Param-Region": "=?base64?SGVsbG8sIOS4lueVjA==?=",
        "Mcp-Param-Limit": "5",
    }
    assert mirrored_arguments(annotated_parameters(schema), {"opts": "not an object"}) == {}


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        (
            {"type": "object", "properties": {"xs": {"type": "array", "items": {"type": "string", "x-mcp-header": "X"}}}},
            "outside a plain chain",
        ),
        ({"type": "object", "anyOf": [{"properties": {"a": {"type": "string", "x-mcp-header": "A"}}}]}, "outside"),
        ({"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": "Bad Header"}}}, "not an HTTP header token"),
        ({"type": "object", "properties": {"a": {"type": "number", "x-mcp-header": "A"}}}, "only string, integer and boolean"),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "string", "x-mcp-header": "Dup"}, "b": {"type": "string", "x-mcp-header": "dup"}},
            },
            "also used by",
        ),
    ],
)
def test_invalid_annotations_are_refused_with_a_reason(schema, reason):
    with pytest.raises(ValueError, match=reason):
        annotated_parameters(schema)
