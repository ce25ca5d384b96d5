"""`llmc servers install --client C -p P`: the gateway entry in a host's own config file."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

import pytest

from tests.helpers import llmc

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
    assert entry == planned["entry"] and entry["args"] == ["serve", "-p", "readonly"]
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
    assert "sdk.add" in {t["name"] for t in json.loads(listed.stdout)["tools"]}


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
    assert json.loads(config.read_text())["mcpServers"]["llmc-gw"]["args"] == ["serve", "-p", str(gateway_profile)]


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
