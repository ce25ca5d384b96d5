"""The <mcp:tool> protocol for models without native tool calling: lenient parsing of what small
models really write, and refusals the model can read when a block cannot be understood."""

from __future__ import annotations

import pytest

from llmc_cli.providers.text import parse_answer, repair_json


def test_several_blocks_and_text_outside():
    text, calls = parse_answer(
        'Looking.\n<mcp:tool>\nname: fs.list\nparameters: {"path": "/tmp"}\n</mcp:tool>\n'
        '<mcp:tool>\nname: sdk.add\nparameters: {"a": 1, "b": 2}\n</mcp:tool>\nDone soon.'
    )
    assert text == "Looking.\n\nDone soon."
    assert [(c.id, c.name, c.arguments, c.error) for c in calls] == [
        ("call-1", "fs.list", {"path": "/tmp"}, None),
        ("call-2", "sdk.add", {"a": 1, "b": 2}, None),
    ]


@pytest.mark.parametrize(
    "params, expected",
    [
        ("{'path': '/tmp', 'recursive': True}", {"path": "/tmp", "recursive": True}),
        ('{path: "/tmp", depth: 2,}', {"path": "/tmp", "depth": 2}),
        ('{"items": [1, 2, 3,], "x": None}', {"items": [1, 2, 3], "x": None}),
        ('```json\n{"q": "it\'s"}\n```', {"q": "it's"}),
        ('{"msg": "say \\"hi\\"", "n": -1.5e3}', {"msg": 'say "hi"', "n": -1500.0}),
        ("{'msg': 'a \"quoted\" word'}", {"msg": 'a "quoted" word'}),
        ('{"text": "True, and None: stay"}', {"text": "True, and None: stay"}),
        ("", {}),
    ],
)
def test_almost_json_is_repaired(params, expected):
    _, calls = parse_answer(f"<mcp:tool>\nname: t\nparameters: {params}\n</mcp:tool>")
    assert calls[0].error is None and calls[0].arguments == expected


def test_name_variants_and_unclosed_last_block():
    _, calls = parse_answer(
        '<mcp:tool>\nName: "fs.read"\nparameters:\n{"path": "/a"}\n<mcp:tool>\nname: `b`\narguments: {"x": 1}'
    )
    assert [(c.name, c.arguments) for c in calls] == [("fs.read", {"path": "/a"}), ("b", {"x": 1})]


@pytest.mark.parametrize(
    "block, error",
    [
        ('parameters: {"a": 1}', "no `name:` line"),
        ("name: t\nparameters: [1, 2]", "must be a JSON object"),
        ('name: t\nparameters: {"a": }', "not valid JSON"),
        ("name: t\nparameters: not json at all", "must be a JSON object"),
    ],
)
def test_malformed_blocks_become_errors_for_the_model(block, error):
    _, calls = parse_answer(f"<mcp:tool>\n{block}\n</mcp:tool>")
    assert len(calls) == 1 and error in calls[0].error and calls[0].arguments == {}


def test_no_blocks_is_an_answer():
    text, calls = parse_answer("The answer is 42. Use <b>bold</b> for mcp: tool names.")
    assert calls == [] and text.startswith("The answer is 42.")


def test_repair_leaves_valid_json_alone():
    assert repair_json('{"a": [1, {"b": "c, }"}]}') == '{"a": [1, {"b": "c, }"}]}'
