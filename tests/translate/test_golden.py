"""Golden tests on real manifests: server-everything's and server-filesystem's tools (stored by
tests/translate/capture.py, re-captured live here so drift in the npm packages is noticed), an
`mcp` SDK server's tools (generated in-process) and hand-written hard cases, translated into every
format. Each output must equal its stored golden file and pass the SDK's own types.

    UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/translate/test_golden.py   # rewrite, then review the diff
"""

from __future__ import annotations

import json
import os

import pytest

from llmc_cli.translate import FORMATS, translate
from tests.translate import capture
from tests.translate.cases import MANIFESTS, hard_tools, sdk_tools, stored, validate

GOLDEN = MANIFESTS / "golden"
SOURCES = {
    "everything": lambda: stored("everything"),
    "filesystem": lambda: stored("filesystem"),
    "sdk": sdk_tools,
    "hard": hard_tools,
}
VARIANTS = [(fmt, False) for fmt in FORMATS] + [("openai", True), ("openai-responses", True)]


@pytest.mark.parametrize("name", ["everything", "filesystem"])
def test_stored_manifest_is_what_the_npm_server_sends_today(name):
    os.makedirs(capture.ALLOWED_DIR, exist_ok=True)
    live = capture.capture(capture.servers()[name])
    saved = json.loads((MANIFESTS / f"{name}.json").read_text())
    assert len(live["tools"]) >= 10
    assert live == saved, f"{name} drifted: run `.venv/bin/python -m tests.translate.capture`, review, update golden"


@pytest.mark.parametrize("source", list(SOURCES))
@pytest.mark.parametrize("fmt,strict", VARIANTS)
def test_translation_matches_golden_and_the_sdk_types(source, fmt, strict):
    tools = SOURCES[source]()
    result = translate(tools, fmt, strict=strict)
    validate(fmt, result.definitions)
    assert sorted(result.names.values()) == sorted((t.server, t.name) for t in tools)
    got = {
        "definitions": result.definitions,
        "names": {k: list(v) for k, v in result.names.items()},
        "warnings": [w.to_json() for w in result.warnings],
    }
    path = GOLDEN / f"{source}.{fmt}{'.strict' if strict else ''}.json"
    if os.environ.get("UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(got, indent=1, ensure_ascii=False) + "\n")
    assert got == json.loads(path.read_text())


def test_mcp_format_is_the_servers_own_json():
    tools = stored("everything")
    assert translate(tools, "mcp").definitions == [t.raw for t in tools]
