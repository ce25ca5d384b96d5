"""`llmc servers install --client C -p P`: the gateway entry in a host's own config file."""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path

import pytest

from tests.helpers import llmc

PROVIDER_SAFE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
# client -> (the key holding servers, whether entries carry "type": "stdio")
CLIENTS = [
    ("claude-desktop", "mcpServers", False),
    ("cursor", "mcpServers", False),
    ("windsurf", "mcpServers", False),
    ("vscode", "servers", True),
    ("claude-code", "mcpServers", True),
]


@pytest.fixture
def named_profile(gateway_profile: Path) -> str:
    """The gateway test profile saved under the config directory as 'readonly'."""
    profiles = Path(os.environ["LLMC_CONFIG_DIR"]) / "profiles"
    profiles.mkdir(parents=True, exist_ok=True)
    (profiles / "readonly.toml").write_text(gateway_profile.read_text())
    return "readonly"


@pytest.mark.parametrize("client, key, typed", CLIENTS)
def test_dry_run_then_install_keeps_the_rest_of_the_file(
    named_profile: str, tmp_path: Path, client: str, key: str, typed: bool
) -> None:
    config = tmp_path / "host" / "config.json"
    config.parent.mkdir()
    original = {key: {"other": {"command": "other-server"}}, "theme": "dark"}
    config.write_text(json.dumps(original))
    args = ["servers", "install", "--client", client, "-p", named_profile, "--config", str(config)]
    dry = llmc(*args, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    planned = json.loads(dry.stdout)
    assert planned["dryRun"] is True and planned["action"] == "add" and planned["name"] == "llmc-readonly"
    assert json.loads(config.read_text()) == original  # nothing written
    done = llmc(*args)
    assert done.returncode == 0, done.stderr
    written = json.loads(config.read_text())
    assert written["theme"] == "dark" and written[key]["other"] == {"command": "other-server"}
    entry = written[key]["llmc-readonly"]
    # every one of these hosts hands tool names to a model provider: provider-safe names
    assert entry == planned["entry"] and entry["args"] == ["serve", "-p", "readonly", "--name-separator", "__"]
    assert planned["nameSeparator"] == "__"
    assert (entry.get("type") == "stdio") is typed and Path(entry["command"]).is_absolute()
    assert entry["env"]["LLMC_CONFIG_DIR"] == os.environ["LLMC_CONFIG_DIR"]
    again = llmc(*args)
    assert again.returncode == 0 and json.loads(again.stdout)["action"] == "unchanged"


def test_the_installed_entry_runs_the_gateway(named_profile: str, tmp_path: Path) -> None:
    config = tmp_path / "claude.json"
    assert llmc("servers", "install", "--client", "claude-desktop", "-p", named_profile, "--config", str(config)).returncode == 0
    entry = json.loads(config.read_text())["mcpServers"]["llmc-readonly"]
    # as a host starts it: that command, that environment (llmc passes --env on to the server)
    env = [f"--env={k}={v}" for k, v in entry["env"].items()]
    listed = llmc("tools", "list", "--stdio", shlex.join([entry["command"], *entry["args"]]), *env)
    assert listed.returncode == 0, listed.stderr
    names = {t["name"] for t in json.loads(listed.stdout)["tools"]}
    assert "sdk__add" in names and all(PROVIDER_SAFE.match(n) for n in names)


def test_claude_desktops_own_config_file(named_profile: str, tmp_path: Path) -> None:
    home = tmp_path / "xdg"
    done = llmc("servers", "install", "--client", "claude-desktop", "-p", named_profile, env={"XDG_CONFIG_HOME": str(home)})
    assert done.returncode == 0, done.stderr
    config = home / "Claude" / "claude_desktop_config.json"
    assert "llmc-readonly" in json.loads(config.read_text())["mcpServers"]


def test_a_profile_given_by_path_is_named_by_its_absolute_path(gateway_profile: Path, tmp_path: Path) -> None:
    config = tmp_path / "cursor.json"
    done = llmc("servers", "install", "--client", "cursor", "-p", str(gateway_profile), "--config", str(config))
    assert done.returncode == 0, done.stderr
    assert json.loads(config.read_text())["mcpServers"]["llmc-gw"]["args"][:3] == ["serve", "-p", str(gateway_profile)]


@pytest.mark.parametrize(
    "content, extra, code, message",
    [
        ('{"mcpServers": {"llmc-readonly": {"command": "x"}}}', [], 2, "pass --replace"),
        ('// my settings\n{"servers": {}}', [], 3, "has comments"),
        ("[1, 2]", [], 3, "expected a JSON object"),
        ("{not json", [], 3, "invalid JSON"),
        ("{}", ["-p", "missing-profile"], 3, "missing-profile"),
    ],
)
def test_refusals_change_nothing(
    named_profile: str, tmp_path: Path, content: str, extra: list[str], code: int, message: str
) -> None:
    config = tmp_path / "host.json"
    config.write_text(content)
    client = "vscode" if "servers" in content else "claude-desktop"
    proc = llmc("servers", "install", "--client", client, "-p", named_profile, "--config", str(config), *extra)
    assert proc.returncode == code and message in proc.stderr and proc.stdout == ""
    assert config.read_text() == content


def test_replace_overwrites_only_that_entry(named_profile: str, tmp_path: Path) -> None:
    config = tmp_path / "host.json"
    config.write_text('{"mcpServers": {"llmc-readonly": {"command": "x"}, "keep": {"command": "y"}}}')
    done = llmc("servers", "install", "--client", "claude-desktop", "-p", named_profile, "--config", str(config), "--replace")
    assert done.returncode == 0 and json.loads(done.stdout)["action"] == "replace"
    servers = json.loads(config.read_text())["mcpServers"]
    assert servers["keep"] == {"command": "y"} and servers["llmc-readonly"]["args"][0] == "serve"


@pytest.mark.parametrize(
    "profile_line, option, args",
    [
        ('name_separator = "_"', [], ["--name-separator", "_"]),  # the profile's own provider-safe choice is kept
        ("", ["--name-separator", "."], []),  # asked for: the dotted names, no flag
        ('name_separator = "_"', ["--name-separator", "__"], ["--name-separator", "__"]),
    ],
)
def test_the_separator_the_host_gets(
    named_profile: str, tmp_path: Path, profile_line: str, option: list[str], args: list[str]
) -> None:
    profile = Path(os.environ["LLMC_CONFIG_DIR"]) / "profiles" / "readonly.toml"
    profile.write_text(profile.read_text() + f"\n[serve]\n{profile_line}\n")
    config = tmp_path / "cursor.json"
    done = llmc("servers", "install", "--client", "cursor", "-p", named_profile, "--config", str(config), *option)
    assert done.returncode == 0, done.stderr
    assert json.loads(config.read_text())["mcpServers"]["llmc-readonly"]["args"] == ["serve", "-p", "readonly", *args]


TOKEN = "s3cret-token-for-the-gateway"
# client -> the entry for a running gateway, with the token read from $GW_TOKEN by the host itself
REMOTE = {
    "cursor": {"url": "http://127.0.0.1:8765/mcp", "headers": {"Authorization": "Bearer ${env:GW_TOKEN}"}},
    "windsurf": {"serverUrl": "http://127.0.0.1:8765/mcp", "headers": {"Authorization": "Bearer ${env:GW_TOKEN}"}},
    "vscode": {"type": "http", "url": "http://127.0.0.1:8765/mcp", "headers": {"Authorization": "Bearer ${env:GW_TOKEN}"}},
    "claude-code": {"type": "http", "url": "http://127.0.0.1:8765/mcp", "headers": {"Authorization": "Bearer ${GW_TOKEN}"}},
}


@pytest.mark.parametrize("client", sorted(REMOTE))
def test_a_running_gateway_is_named_by_url_and_the_token_stays_in_the_environment(
    named_profile: str, tmp_path: Path, client: str
) -> None:
    config = tmp_path / "host.json"
    args = ["servers", "install", "--client", client, "-p", named_profile, "--config", str(config)]
    done = llmc(*args, "--url", "http://127.0.0.1:8765/mcp", "--token-env", "GW_TOKEN", env={"GW_TOKEN": TOKEN})
    assert done.returncode == 0, done.stderr
    key = "servers" if client == "vscode" else "mcpServers"
    assert json.loads(config.read_text())[key]["llmc-readonly"] == REMOTE[client]
    assert TOKEN not in config.read_text() + done.stdout + done.stderr
    # the gateway's profile serves dotted names, which these hosts cannot hand to a model: said
    assert 'set [serve] name_separator = "__"' in done.stderr


def test_claude_desktop_reaches_a_token_only_gateway_through_mcp_remote(named_profile: str, tmp_path: Path) -> None:
    config = tmp_path / "claude.json"
    config.write_text('{"mcpServers": {}, "theme": "dark"}')
    config.chmod(0o644)
    args = ["servers", "install", "--client", "claude-desktop", "-p", named_profile, "--config", str(config)]
    done = llmc(*args, "--url", "https://gw.example.test/mcp", "--token-env", "GW_TOKEN", env={"GW_TOKEN": f"Bearer {TOKEN}"})
    assert done.returncode == 0, done.stderr
    entry = json.loads(config.read_text())["mcpServers"]["llmc-readonly"]
    assert entry["args"] == [
        "-y",
        "mcp-remote@0.15",
        "https://gw.example.test/mcp",
        "--transport",
        "http-only",
        "--header",
        "Authorization:${AUTH_HEADER}",  # no space in an argument: hosts split them
    ]
    assert entry["command"].endswith("npx") and entry["env"] == {"AUTH_HEADER": f"Bearer {TOKEN}"}
    assert config.stat().st_mode & 0o777 == 0o600  # a token lives in it now
    shown = json.loads(done.stdout)
    assert shown["entry"]["env"] == {"AUTH_HEADER": "Bearer ***"} and TOKEN not in done.stdout + done.stderr
    plain = llmc(*args, "--name", "plain", "--url", "http://10.0.0.5:8765/mcp")  # no token; http past loopback
    assert plain.returncode == 0, plain.stderr
    entry = json.loads(config.read_text())["mcpServers"]["plain"]
    assert entry["args"][-1] == "--allow-http" and "env" not in entry and "--header" not in entry["args"]


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--token-env", "GW_TOKEN"], "--token-env goes with --url"),
        (["--url", "http://127.0.0.1:1/mcp", "--name-separator", "__"], "set [serve] name_separator"),
        (["--url", "127.0.0.1:8765"], "http:// or https:// URL"),
        (["--url", "http://127.0.0.1:1/mcp", "--token-env", "UNSET_TOKEN_VAR"], "set UNSET_TOKEN_VAR to the principal's token"),
        (["--url", "http://127.0.0.1:1/mcp", "--token-env", "$X"], "name of an environment variable"),
    ],
)
def test_install_refusals_for_remote_gateways(named_profile: str, tmp_path: Path, extra: list[str], message: str) -> None:
    config = tmp_path / "host.json"
    config.write_text("{}")
    proc = llmc("servers", "install", "--client", "claude-desktop", "-p", named_profile, "--config", str(config), *extra)
    assert proc.returncode == 2 and message in proc.stderr and proc.stdout == ""
    assert config.read_text() == "{}"
