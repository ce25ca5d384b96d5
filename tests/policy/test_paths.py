"""policy.decide on path arguments, in process, against a real directory tree with real symlinks:
every spelling of a path outside the allowed folder is denied, every spelling inside is allowed.
Adding a variant is one line in a table.

The tree (under tmp): allowed/ is what the rule allows; outside/etc/passwd stands for /etc."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from llmc_cli import policy
from llmc_cli.config.schema import PolicyConfig
from llmc_cli.model import Tool, ToolCall


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "allowed" / "a" / "b").mkdir(parents=True)
    (tmp_path / "allowed" / "etc").mkdir()
    (tmp_path / "allowed" / "notes.txt").write_text("fine\n")
    (tmp_path / "outside" / "etc").mkdir(parents=True)
    (tmp_path / "outside" / "etc" / "passwd").write_text("root:x:0:0\n")
    links = {
        "allowed/etc-link": "{root}/outside/etc",  # absolute, out of the allowed folder
        "allowed/rel-out": "../outside",  # relative, out
        "allowed/inner": "a/b",  # relative, stays inside
        "allowed/c1": "c2",
        "allowed/c2": "c3",
        "allowed/c3": "../outside/etc",  # a chain out
        "allowed/loop1": "loop2",
        "allowed/loop2": "loop1",  # a loop
        "allowed/self": "self",
        "allowed/a/b/up": "../../etc-link",  # a link to a link, reached from deeper
        "allowed/a/b/dotdot": "..",  # a link that is only `..`
        "outside/into": "{root}/allowed/notes.txt",  # a link out there pointing in here
        "allowed-link": "allowed",  # the allowed folder under another name
        "allowed/dangling": "{root}/outside/new-file",  # dangling: a write would create it outside
    }
    for link, target in links.items():
        os.symlink(target.format(root=tmp_path), tmp_path / link)
    return tmp_path


def decide(
    tree: Path, arguments: dict, *, cwd: str | None = "allowed", rule: str = "allowed/**", schema: dict | None = None
) -> policy.Decision:
    config = PolicyConfig(args={"fs.*": {"path": [f"{tree}/{rule}"], "paths": [f"{tree}/{rule}"]}})
    tool = Tool("fs", "read", schema or {"type": "object"})
    return policy.decide(
        ToolCall("fs", "read", arguments), tool, config, caller="human", cwd=None if cwd is None else f"{tree}/{cwd}"
    )


# (path as the model spells it ({root} = the tree), the server's cwd relative to the tree or None)
DENIED = [
    ("{root}/allowed/etc-link/../etc/passwd", "allowed"),  # the example: `..` after a link
    ("{root}/allowed/etc-link/passwd", "allowed"),  # plainly through the link
    ("{root}/allowed/rel-out/etc/passwd", "allowed"),  # relative link
    ("{root}/allowed/c1/passwd", "allowed"),  # a chain of links
    ("{root}/allowed/c1/../etc/passwd", "allowed"),  # a chain, then `..`
    ("{root}/allowed/a/b/up/../etc/passwd", "allowed"),  # deeper: link to link, then `..`
    ("{root}/allowed/a/b/up/../../outside/etc/passwd", "allowed"),
    ("{root}/allowed/etc-link/../../allowed/etc-link/../etc/passwd", "allowed"),  # repeated
    ("{root}/allowed/inner/../../../outside/etc/passwd", "allowed"),  # `..` after an inner link
    ("{root}/allowed/a/b/dotdot/../../outside/etc/passwd", "allowed"),  # textually: allowed/a/outside/...
    ("{root}/allowed/loop1", "allowed"),  # ELOOP
    ("{root}/allowed/self/x", "allowed"),
    ("{root}/allowed/new/../../outside/etc/passwd", "allowed"),  # `..` after a missing folder
    ("{root}/allowed/new/dir/../../../outside/x", "allowed"),
    ("{root}/allowed/etc-link/new/../passwd", "allowed"),  # missing after a link, then `..`
    ("{root}/allowed/new/../etc-link/passwd", "allowed"),  # back out of a missing folder into a link
    ("{root}/allowed/dangling", "allowed"),  # writing through it creates outside
    ("{root}/outside/into", "allowed"),  # the link itself is outside (unlink, rename)
    ("{root}/allowed//..//outside/etc/passwd", "allowed"),
    ("etc-link/../etc/passwd", "allowed"),  # relative, judged at the server's cwd
    ("../outside/etc/passwd", "allowed"),
    ("etc/passwd", "outside"),  # the issue's `cwd = "/"` example
    ("notes.txt", None),  # relative, cwd unknown: refused
    ("", None),
    ("", "outside"),  # "" is the server's cwd itself
    ("file://{root}/outside/etc/passwd", "allowed"),
    ("file://{root}/allowed/%2e%2e/outside/etc/passwd", "allowed"),  # percent-encoded `..`
    ("file://otherhost{root}/allowed/notes.txt", "allowed"),  # a host we cannot judge
    ("{root}/allowed/notes.txt\x00/../../outside", "allowed"),  # NUL
    ("~/../outside/etc/passwd", "allowed"),
    ("{root}/allowed/inner/../../outside/etc/passwd", "allowed"),  # kernel: allowed/outside/...; as text: outside
]

ALLOWED = [
    ("{root}/allowed/notes.txt", "allowed"),
    ("{root}/allowed/inner/x.txt", "allowed"),  # a link that stays inside
    ("{root}/allowed/inner/../etc", "allowed"),  # inner -> a/b, so `..` is allowed/a
    ("{root}/allowed/new/dir/file.txt", "allowed"),  # to be created
    ("{root}/allowed/new/../notes.txt", "allowed"),
    ("{root}/allowed-link/notes.txt", "allowed"),  # another name of the allowed folder
    ("{root}/allowed", "allowed"),
    ("{root}/allowed/etc-link/../../allowed/notes.txt", "allowed"),
    ("notes.txt", "allowed"),  # relative at a known cwd
    ("a/b/../../notes.txt", "allowed"),
    ("", "allowed"),
    ("file://{root}/allowed/notes.txt", "allowed"),
    ("file://localhost{root}/allowed/notes.txt", "allowed"),
    ("~/notes.txt", "allowed"),
]


@pytest.mark.parametrize("spelling,cwd", DENIED)
def test_escapes_are_denied(tree, monkeypatch, spelling, cwd):
    monkeypatch.setenv("HOME", str(tree / "allowed"))
    decision = decide(tree, {"path": spelling.format(root=tree)}, cwd=cwd)
    assert decision.action == "deny" and decision.rule == "args.fs.*.path", decision


@pytest.mark.parametrize("spelling,cwd", ALLOWED)
def test_paths_inside_are_allowed(tree, monkeypatch, spelling, cwd):
    monkeypatch.setenv("HOME", str(tree / "allowed"))
    decision = decide(tree, {"path": spelling.format(root=tree)}, cwd=cwd)
    assert decision.action == "allow", decision


@pytest.mark.parametrize(
    "spelling,cwd,says",
    [
        ("{root}/allowed/loop1", "allowed", "too many levels of symbolic links"),
        ("notes.txt", None, "does not know the server's working directory"),
        ("{root}/x\x00y", "allowed", "NUL byte"),
        ("{root}/allowed/etc-link/../etc/passwd", "allowed", "resolved {root}/outside/etc/passwd"),
        ("{root}/outside/into", "allowed", "resolved {root}/outside/into"),
        ("file://h/x", "allowed", "file: URI with a host"),
    ],
)
def test_denials_say_why(tree, spelling, cwd, says):
    decision = decide(tree, {"path": spelling.format(root=tree)}, cwd=cwd)
    assert decision.action == "deny" and says.format(root=tree) in decision.reason, decision.reason


# Every string under a ruled key counts, at any depth; other leaves are refused.
@pytest.mark.parametrize(
    "arguments,action",
    [
        ({"paths": ["{root}/allowed/notes.txt", "{root}/allowed/a"]}, "allow"),  # a rule on `paths` takes lists
        ({"paths": ["{root}/allowed/notes.txt", "{root}/outside/etc/passwd"]}, "deny"),
        ({"paths": ["{root}/allowed/notes.txt", "{root}/allowed/etc-link/../etc/passwd"]}, "deny"),
        ({"paths": []}, "allow"),  # names nothing
        ({"paths": [["{root}/allowed/a"], {"x": "{root}/allowed/notes.txt"}]}, "allow"),
        ({"paths": [["{root}/allowed/a"], {"x": "{root}/outside/etc"}]}, "deny"),
        ({"path": {"from": "{root}/allowed/notes.txt", "to": "{root}/outside/x"}}, "deny"),
        ({"path": {"from": "{root}/allowed/notes.txt", "to": "{root}/allowed/y"}}, "allow"),
        ({"path": ["{root}/outside/x"]}, "deny"),  # a list under `path` too
        ({"paths": ["{root}/allowed/notes.txt", 7]}, "deny"),  # not a path
        ({"path": None}, "deny"),  # a server would use its default
        ({"path": True}, "deny"),
        ({"paths": [{"deep": [1.5]}]}, "deny"),
        ({"other": "{root}/outside/etc/passwd"}, "allow"),  # no rule on `other`
    ],
)
def test_lists_and_nested_values(tree, arguments, action):
    def fill(value):
        if isinstance(value, str):
            return value.format(root=tree)
        if isinstance(value, list):
            return [fill(v) for v in value]
        if isinstance(value, dict):
            return {k: fill(v) for k, v in value.items()}
        return value

    decision = decide(tree, fill(arguments))
    assert decision.action == action, decision


def test_nesting_is_bounded(tree):
    value: object = f"{tree}/allowed/notes.txt"
    for _ in range(policy.MAX_NESTING + 1):
        value = [value]
    decision = decide(tree, {"paths": value})
    assert decision.action == "deny" and "nests deeper" in decision.reason


@pytest.mark.parametrize(
    "default,cwd,action",
    [
        (".", "allowed", "allow"),
        (".", "outside", "deny"),  # the argument left out: the server uses its default, judged the same
        ("/", "allowed", "deny"),
    ],
)
def test_a_left_out_argument_is_judged_by_its_schema_default(tree, default, cwd, action):
    schema = {"type": "object", "properties": {"path": {"type": "string", "default": default}}}
    assert decide(tree, {}, cwd=cwd, schema=schema).action == action


# The rule's own glob: its literal head is resolved the same way.
@pytest.mark.parametrize(
    "rule,spelling,action",
    [
        ("allowed-link/**", "{root}/allowed/notes.txt", "allow"),  # the rule names a link to the folder
        ("allowed-link/**", "{root}/allowed-link", "allow"),  # ... and the link itself
        ("allowed-link/**", "{root}/outside/etc/passwd", "deny"),
        ("allowed/etc-link/../**", "{root}/outside/etc/passwd", "allow"),  # head: `..` after the link
        ("allowed/etc-link/../**", "{root}/allowed/notes.txt", "deny"),
        ("allowed/*.txt", "{root}/allowed/notes.txt", "allow"),
        ("allowed/*.txt", "{root}/allowed/a/x.txt", "deny"),  # `*` stays in one folder
        ("allowed/**/*.txt", "{root}/allowed/a/x.txt", "allow"),
        ("allowed/loop1/**", "{root}/allowed/notes.txt", "deny"),  # a rule that cannot resolve matches nothing
    ],
)
def test_rule_globs_resolve_like_paths(tree, rule, spelling, action):
    assert decide(tree, {"path": spelling.format(root=tree)}, rule=rule).action == action


def test_relative_rule_globs_start_at_the_servers_cwd(tree):
    config = PolicyConfig(args={"fs.*": {"path": ["./**"]}})
    call = ToolCall("fs", "read", {"path": f"{tree}/allowed/notes.txt"})
    assert policy.decide(call, None, config, caller="human", cwd=f"{tree}/allowed").action == "allow"
    assert policy.decide(call, None, config, caller="human", cwd=f"{tree}/outside").action == "deny"


# Where each kind of server resolves relative paths, as the policy is told (None: unknown).
@pytest.mark.parametrize(
    "spec,keeper,expected",
    [
        ({"command": ("srv",)}, False, "{here}"),  # stdio without cwd: inherits llmc's
        ({"command": ("srv",), "cwd": "sub"}, False, "{here}/sub"),  # relative to llmc's
        ({"command": ("srv",), "cwd": "/srv/x"}, False, "/srv/x"),
        ({"url": "http://127.0.0.1:9/mcp"}, False, None),  # remote: unknown
        ({"builtin": "workspace", "options": {"roots": ["/data", "/more"]}}, False, "/data"),  # its first root
        ({"builtin": "workspace"}, False, "{here}"),
        ({"command": ("srv",)}, True, None),  # a keeper runs it, started elsewhere
        ({"command": ("srv",), "cwd": "/srv/x"}, True, "/srv/x"),
    ],
)
def test_the_servers_working_directory(tmp_path, monkeypatch, spec, keeper, expected):
    from llmc_cli.catalog import Catalog, ConnectOptions
    from llmc_cli.model import ServerSpec

    monkeypatch.chdir(tmp_path)
    catalog = Catalog([ServerSpec(name="s", **spec)], ConnectOptions(keeper=("/nonexistent.sock", "k") if keeper else None))
    assert catalog.pool.working_directory("s") == (expected.format(here=os.getcwd()) if expected else None)
