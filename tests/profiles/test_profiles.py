"""Profiles as a user meets them: loading, one-line errors, and writes that keep the file whole."""

from __future__ import annotations

import os
import stat
import sys
import tomllib
from pathlib import Path

import pytest

from llmc_cli.config import profile_writer, profiles
from llmc_cli.errors import ConfigError
from tests.helpers import ROOT, llmc, profile_file, sdk_server
from tests.profiles.runner import toml_str

SDK_PY, SDK_SCRIPT = sdk_server("sdk_server.py")


@pytest.fixture
def config(isolated_dirs: Path) -> Path:
    return isolated_dirs / "config"


def sdk_profile(extra: str = "") -> str:
    return f"""description = "test"
[servers.sdk]
command = {toml_str(SDK_PY)}
args = [{toml_str(SDK_SCRIPT)}]
{extra}
"""


def one_line(text: str) -> str:
    assert text.count("\n") == 1, text
    return text.strip()


@pytest.mark.parametrize("example", sorted((ROOT / "profiles").glob("*.toml")), ids=lambda p: p.name)
def test_example_profiles_load_as_they_are(example: Path):
    loaded = profiles.load_profile(str(example))
    assert loaded.profile.description and loaded.profile.servers
    run = llmc("--profile", str(example), "servers", "list")
    assert run.returncode == 0, run.stderr
    assert [s["name"] for s in run.json()["servers"]] == list(loaded.profile.servers)


def test_no_profile_means_the_builtin_default_then_default_toml(config: Path):
    run = llmc("servers", "list")
    assert run.returncode == 0
    assert run.json()["profile"] == "builtin:default" and run.json()["path"] is None
    assert [s["name"] for s in run.json()["servers"]] == ["workspace"]
    profile_file(config, sdk_profile())
    assert [s["name"] for s in llmc("servers", "list").json()["servers"]] == ["sdk"]


def test_profile_by_name_path_and_environment(config: Path, tmp_path: Path):
    profile_file(config, sdk_profile(), "work")
    other = tmp_path / "elsewhere.toml"
    other.write_text(sdk_profile().replace("[servers.sdk]", "[servers.other]"))
    assert llmc("-p", "work", "servers", "list").json()["profile"] == "work"
    assert llmc("--profile", str(other), "servers", "list").json()["servers"][0]["name"] == "other"
    assert llmc("servers", "list", env={"LLMC_PROFILE": "work"}).json()["profile"] == "work"
    missing = llmc("-p", "nope", "servers", "list")
    assert missing.returncode == 3 and "profile not found" in one_line(missing.stderr)


@pytest.mark.parametrize(
    "text, expected",
    [
        ('[servers.a]\ncommand = "x"\nargs = [oops]\n', ["default.toml:3:", "invalid TOML"]),
        (
            'description = "x"\n[servers.a]\ncomand = "x"\n',
            ["default.toml:3:", "servers.a.comand", "unknown key (did you mean 'command'?)"],
        ),
        ('[servers.a]\ncommand = "x"\ntimeout = "fast"\n', ["default.toml:3:", "servers.a.timeout", "number"]),
        ("[servers.a]\nenabled = true\n", ["default.toml:1:", "servers.a", "exactly one of"]),
        ('[servers.a]\ncommand = "x"\nheaders = { A = "b" }\n', ["servers.a", "remote servers"]),
        ("[policy]\nread_olny = true\n", ["default.toml:2:", "policy.read_olny", "unknown key (did you mean 'read_only'?)"]),
        (
            '[servers.a]\ncommand = "x"\n[servers.b]\ncommand = "y"\n[serve]\nbare_names = true\n',
            ["default.toml", "bare_names needs exactly one server"],
        ),
        ('[llm]\nmodel = "m"\nsummarize_with = "openai:m"\n', ["default.toml:3:", "llm.summarize_with", "removed"]),
        ('[audit]\nsync = "later"\n', ["default.toml:2:", "audit.sync", "'before_call' or 'before_reply'"]),
    ],
)
def test_a_broken_profile_is_one_line_naming_file_line_and_key(config: Path, text: str, expected: list[str]):
    profile_file(config, text)
    for argv in (["servers", "list"], ["tools", "list"], ["servers", "add", "x", "--url", "http://127.0.0.1:9/"]):
        run = llmc(*argv)
        assert run.returncode == 3, (argv, run.stderr)
        line = one_line(run.stderr)
        assert all(part in line for part in expected), line
    assert (config / "profiles" / "default.toml").read_text() == text  # nothing rewritten


def test_an_unknown_server_named_with_s_is_a_usage_error(config: Path):
    profile_file(config, sdk_profile())
    run = llmc("tools", "list", "-s", "nope")
    assert run.returncode == 2
    assert "has no server 'nope' (servers: sdk)" in one_line(run.stderr)
    assert llmc("servers", "show", "nope").returncode == 2
    assert llmc("servers", "remove", "nope").returncode == 2


def test_variables_expand_when_used_and_a_missing_one_is_named(config: Path, monkeypatch: pytest.MonkeyPatch):
    profile_file(
        config,
        f"""
[servers.sdk]
command = "${{LLMC_TEST_PYTHON}}"
args = ["${{LLMC_TEST_SCRIPT_DIR:-{Path(SDK_SCRIPT).parent}}}/sdk_server.py"]
""",
    )
    run = llmc("tools", "list")
    assert run.returncode == 3
    assert "environment variable LLMC_TEST_PYTHON is not set" in one_line(run.stderr)
    assert "server sdk" in run.stderr
    monkeypatch.setenv("LLMC_TEST_PYTHON", sys.executable)
    run = llmc("tools", "list")
    assert run.returncode == 0, run.stderr
    assert "echo" in [t["name"] for t in run.json()["tools"]]
    # shown and saved unexpanded
    assert llmc("servers", "show", "sdk").json()["command"] == "${LLMC_TEST_PYTHON}"
    assert llmc("servers", "add", "extra", "--url", "http://127.0.0.1:9/mcp", "--disabled").returncode == 0
    assert "${LLMC_TEST_PYTHON}" in (config / "profiles" / "default.toml").read_text()


def test_writing_keeps_every_other_table_and_the_file_mode(config: Path):
    original = """description = "keep me"
audit_results = true

[servers.sdk]
command = "${PY:-python3}"
args = ["-m", "x"]
env = { TOKEN = "${MY_TOKEN}" }

[policy]
default = "deny"
allow = ["sdk.echo"]

[policy.hints."sdk.echo"]
readOnly = true

[llm]
provider = "anthropic"
model = "m"
"""
    path = profile_file(config, original)
    path.chmod(0o640)
    run = llmc(
        "servers",
        "add",
        "remote",
        "--url",
        "https://example.com/mcp",
        "--header",
        "Authorization: Bearer ${ERP_TOKEN}",
        "--timeout",
        "5",
    )
    assert run.returncode == 0, run.stderr
    before, after = tomllib.loads(original), tomllib.loads(path.read_text())
    assert after["servers"].pop("remote") == {
        "url": "https://example.com/mcp",
        "headers": {"Authorization": "Bearer ${ERP_TOKEN}"},
        "timeout": 5.0,
    }
    assert after == before
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert llmc("servers", "remove", "remote").returncode == 0
    assert tomllib.loads(path.read_text()) == before
    assert sorted(p.name for p in path.parent.iterdir()) == ["default.toml"]  # no temp files left


def test_update_profile_never_writes_an_invalid_result(config: Path):
    path = profile_file(config, sdk_profile('[llm]\nmodel = "m"\n'))

    def bad(data: dict) -> None:
        data["servers"]["more"] = {"url": "https://example.com/mcp", "transport": "carrier-pigeon"}

    text = path.read_text()
    with pytest.raises(ConfigError, match=r"servers\.more\.transport"):
        profile_writer.update_profile(path, bad)
    assert path.read_text() == text  # an invalid result is never written


def test_a_duplicate_server_name_is_refused_unless_replace(config: Path):
    path = profile_file(config, sdk_profile())
    text = path.read_text()
    run = llmc("servers", "add", "sdk", "--", "other-command")
    assert run.returncode == 3 and "already exists (use --replace" in one_line(run.stderr)
    assert path.read_text() == text
    run = llmc("servers", "add", "sdk", "--replace", "--", "other-command", "--flag")
    assert run.returncode == 0
    assert llmc("servers", "show", "sdk").json()["args"] == ["--flag"]


def test_an_unwritable_config_directory_is_one_line_and_writes_nothing(isolated_dirs: Path):
    blocker = isolated_dirs / "not-a-dir"
    blocker.write_text("a file where the config directory should be")
    run = llmc("servers", "add", "sdk", "--", "x", env={"LLMC_CONFIG_DIR": str(blocker)})
    assert run.returncode == 3
    line = one_line(run.stderr)
    assert "cannot write" in line and str(blocker) in line
    assert blocker.read_text() == "a file where the config directory should be"
    assert llmc("profiles", "init", env={"LLMC_CONFIG_DIR": str(blocker)}).returncode == 3


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write into a read-only directory")
def test_a_read_only_profiles_directory_keeps_the_old_file(config: Path):
    path = profile_file(config, sdk_profile())
    text = path.read_text()
    path.parent.chmod(0o500)
    try:
        run = llmc("servers", "add", "x", "--", "y")
        assert run.returncode == 3 and str(path) in one_line(run.stderr)
        assert path.read_text() == text and os.listdir(path.parent) == ["default.toml"]
    finally:
        path.parent.chmod(0o700)


def test_servers_add_on_an_empty_config_writes_the_default_profile_first(config: Path):
    run = llmc("servers", "add", "sdk", "--env", "DEBUG=1", "--cwd", "/tmp", "--description", "d", "--", SDK_PY, SDK_SCRIPT)
    assert run.returncode == 0, run.stderr
    assert "created profile" in run.stderr
    path = config / "profiles" / "default.toml"
    data = tomllib.loads(path.read_text())
    assert "policy" not in data  # the default policy: destructive tools of added servers need a yes
    assert data["servers"]["workspace"]["options"]["read_only"] is True
    assert data["servers"]["sdk"] == {
        "command": SDK_PY,
        "args": [SDK_SCRIPT],
        "env": {"DEBUG": "1"},
        "cwd": "/tmp",
        "description": "d",
        "sandbox": "auto",
        "network": False,  # an installed script: no package runner downloads it
    }
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # a new profile is private
    assert run.json() == {"added": "sdk", "profile": "default", "path": str(path), "server": data["servers"]["sdk"]}


@pytest.mark.parametrize(
    "argv, message",
    [
        (["servers", "add", "x"], "either `-- COMMAND"),
        (["servers", "add", "x", "--url", "https://h/", "--", "cmd"], "either `-- COMMAND"),
        (["servers", "add", "x", "--url", "ftp://h/"], "must start with http"),
        (["servers", "add", "x", "--url", "https://h/", "--env", "A=1"], "stdio servers only"),
        (["servers", "add", "x", "--header", "A: b", "--", "cmd"], "--url servers only"),
        (["servers", "add", "x", "--url", "https://h/", "--header", "no-colon"], "expects K:V"),
        (["servers", "add", "a.b", "--", "cmd"], "must be non-empty and contain no '.'"),
    ],
)
def test_servers_add_usage_errors(config: Path, argv: list[str], message: str):
    run = llmc(*argv)
    assert run.returncode == 2 and message in one_line(run.stderr), run.stderr
    assert not (config / "profiles").exists()


def test_a_literal_secret_typed_by_the_user_is_kept_but_never_shown(config: Path):
    run = llmc("servers", "add", "erp", "--url", "https://erp.example.com/mcp", "--header", "Authorization: Bearer s3cr3t-value")
    assert run.returncode == 0
    assert "literal secret" in run.stderr and "s3cr3t-value" not in run.stdout + run.stderr
    assert "s3cr3t-value" in (config / "profiles" / "default.toml").read_text()
    for argv in (["servers", "list"], ["servers", "show", "erp"], ["profiles", "show"], ["servers", "list", "--format", "jsonl"]):
        out = llmc(*argv).stdout
        assert "s3cr3t-value" not in out and "***" in out, argv


def test_listing_formats_and_no_colour(config: Path):
    profile_file(config, sdk_profile('[servers.remote]\nurl = "https://h/mcp"\nenabled = false\n'))
    rows = [__import__("json").loads(line) for line in llmc("servers", "list", "--format", "jsonl").stdout.splitlines()]
    assert [(r["name"], r["kind"], r["enabled"]) for r in rows] == [("sdk", "stdio", True), ("remote", "remote", False)]
    table = llmc("servers", "list", "--format", "table", env={"NO_COLOR": "1"}).stdout
    assert table.splitlines()[0].split() == ["name", "kind", "enabled", "runs", "target", "description"]
    assert "https://h/mcp" in table and "\x1b" not in table
    error = llmc("servers", "show", "nope", env={"NO_COLOR": "1"})
    assert error.stderr.startswith("llmc: ") and "\x1b" not in error.stderr


def test_profiles_init_list_show(config: Path):
    run = llmc("profiles", "init")
    assert run.returncode == 0
    path = Path(run.json()["created"])
    assert profiles.load_profile(None).profile.servers["workspace"].builtin == "workspace"
    again = llmc("profiles", "init")
    assert again.returncode == 3 and "already exists" in one_line(again.stderr)
    assert llmc("profiles", "init", "--force").returncode == 0
    profile_file(config, "[servers.a]\ncomand = 1\n", "broken")
    listed = llmc("profiles", "list").json()
    assert listed["directory"] == str(path.parent)
    by_name = {p["name"]: p for p in listed["profiles"]}
    assert by_name["default"]["servers"] == ["workspace"] and "broken" not in by_name
    [broken] = listed["errors"]  # a file that does not load is an error entry, not a row
    assert (broken["profile"], broken["error"], broken["exitCode"]) == ("broken", "config", 3)
    assert "unknown key" in broken["message"]
    lines = llmc("profiles", "list", "--format", "jsonl").lines()
    assert [line.get("name") or line.get("profile") for line in lines] == ["default", "broken"]
    assert [("error" in line) for line in lines] == [False, True]
    assert "broken" in llmc("profiles", "list", "--format", "table").stdout
    shown = llmc("profiles", "show", "default").json()
    assert shown["profile"]["servers"]["workspace"]["options"]["read_only"] is True and shown["path"] == str(path)
    assert llmc("profiles", "show", "broken").returncode == 3
