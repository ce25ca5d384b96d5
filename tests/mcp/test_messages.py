"""mcp/messages.py: every TypedDict names only fields the MCP schema has (in some version llmc
speaks) and every field the newest schema requires; the readers of optional objects and ids."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

from llmc_cli.mcp import messages
from llmc_cli.mcp.versions import SUPPORTED_VERSIONS

SPEC = Path("/work/shared/mcp-spec")
# TypedDicts whose schema definition is named differently in some version, or not at all.
SCHEMA_NAMES = {
    "ErrorObject": ("Error",),
    "JSONRPCResultResponse": ("JSONRPCResultResponse", "JSONRPCResponse"),
    "JSONRPCErrorResponse": ("JSONRPCErrorResponse", "JSONRPCError"),
    "ToolDefinition": ("Tool",),
}  # model.Tool is the dataclass llmc works with
NOT_IN_SCHEMA = {"ResultMeta"}  # Result's fields, declared once for every result


def _definitions() -> list[dict[str, Any]]:
    found = []
    for version in SUPPORTED_VERSIONS:
        path = SPEC / version / "schema.json"
        if path.exists():
            schema = json.loads(path.read_text())
            found.append(schema.get("$defs") or schema.get("definitions") or {})
    return found


def _declared() -> tuple[dict[str, set[str]], list[str]]:
    """The TypedDicts of messages.py with their fields (inherited ones too, as __annotations__
    has them), and the type aliases beside them, read from the source: at run time every shape
    is `dict` (they exist for the type checker only)."""
    tree = ast.parse(Path(messages.__file__).read_text())
    block = next(n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
    fields: dict[str, set[str]] = {}
    aliases = []
    for node in block.body:
        if isinstance(node, ast.ClassDef):
            own = {s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
            for base in node.bases:
                if isinstance(base, ast.Name) and base.id in fields:
                    own |= fields[base.id]
            fields[node.name] = own
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            aliases.append(node.target.id)
    return fields, aliases


FIELDS, ALIASES = _declared()


def _shapes() -> list[str]:
    return [name for name in FIELDS if name not in NOT_IN_SCHEMA]


def test_every_shape_is_a_plain_dict_at_run_time() -> None:
    assert len(FIELDS) >= 40
    assert set(messages.SHAPES) == set(FIELDS) | set(ALIASES)
    assert all(getattr(messages, name) is dict for name in messages.SHAPES)
    assert messages.TextContent(type="text", text="hi") == {"type": "text", "text": "hi"}


@pytest.mark.parametrize("name", _shapes())
def test_fields_are_the_schemas(name: str) -> None:
    versions = _definitions()
    if not versions:
        pytest.skip("the MCP schemas are not at hand")
    shape = FIELDS[name]
    known: set[str] = set()
    for defs in versions:
        for schema_name in SCHEMA_NAMES.get(name, (name,)):
            known |= set(defs.get(schema_name, {}).get("properties", {}))
    assert known, f"{name} is in no schema"
    assert shape <= known, f"{name}: not in any schema: {shape - known}"
    newest = next(d for d in versions for n in SCHEMA_NAMES.get(name, (name,)) if n in d)
    required = next(set(newest[n].get("required", [])) for n in SCHEMA_NAMES.get(name, (name,)) if n in newest)
    assert required <= shape, f"{name}: misses {required - shape}"


def test_object_at_reads_an_optional_object() -> None:
    assert messages.object_at({"params": {"a": 1}}, "params") == {"a": 1}
    absent: tuple[messages.JSONObject, ...] = ({}, {"params": None}, {"params": [1]}, {"params": "x"})
    for message in absent:
        assert messages.object_at(message, "params") == {}


def test_request_id_is_a_string_or_a_number() -> None:
    assert messages.request_id({"id": 7}) == 7
    assert messages.request_id({"id": "a"}) == "a"
    others: tuple[messages.JSONObject, ...] = ({}, {"id": None}, {"id": True}, {"id": [1]}, {"id": 1.5})
    for other in others:
        assert messages.request_id(other) is None
