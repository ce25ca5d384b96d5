"""`llmc servers import` over sample configs in each ecosystem's documented shape
(tests/data/imports/), then the imported servers used for real."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from tests.helpers import ROOT, llmc, node_tool, profile_file, sdk_server

SAMPLES = ROOT / "tests" / "data" / "imports"

BOXED = {"sandbox": "auto", "network": True}  # what import writes for a package runner's server (README "Sandboxing servers")
INSTALLED = {"sandbox": "auto", "network": False}  # and for an installed program


@pytest.fixture
def default_profile(isolated_dirs: Path) -> Path:
    return isolated_dirs / "config" / "profiles" / "default.toml"


def imported(path: Path) -> dict:
    return tomllib.loads(path.read_text())["servers"]


def test_claude_desktop_stdio_servers_and_a_literal_token_left_behind(default_profile: Path):
    run = llmc("servers", "import", str(SAMPLES / "claude_desktop_config.json"))
    assert run.returncode == 0, run.stderr
    out = run.json()
    assert out["source"] == "mcpServers" and out["added"] == ["filesystem", "github"] and out["skipped"] == []
    servers = imported(default_profile)
    assert servers["filesystem"] == {
        "command": "npx",
        "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/username/Desktop", "/Users/username/Downloads"],
        **BOXED,
    }
    assert servers["github"]["env"] == {"GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_PERSONAL_ACCESS_TOKEN}"}
    assert "ghp_" not in default_profile.read_text() + run.stdout + run.stderr
    assert "set ${GITHUB_PERSONAL_ACCESS_TOKEN} for server github" in run.stderr
    assert servers["workspace"]["builtin"] == "workspace"  # the default profile was written first


def test_claude_code_types_headers_and_existing_placeholders(default_profile: Path):
    assert llmc("servers", "import", str(SAMPLES / "claude_code.mcp.json")).returncode == 0
    servers = imported(default_profile)
    assert servers["api-server"] == {
        "url": "${API_BASE_URL:-https://api.example.com}/mcp",
        "transport": "http",
        "headers": {"Authorization": "Bearer ${API_KEY}"},
    }
    assert servers["sentry"] == {"url": "https://mcp.sentry.dev/sse", "transport": "sse"}
    assert servers["shared-server"] == {"command": "/path/to/server", "env": {"CACHE_DIR": "/tmp/cache"}, **INSTALLED}


def test_cursor_env_syntax_renamed_server_and_unsupported_keys_reported(default_profile: Path):
    run = llmc("servers", "import", str(SAMPLES / "cursor.mcp.json"))
    assert run.returncode == 0
    servers = imported(default_profile)
    assert servers["remote-example"] == {"url": "http://localhost:3000/mcp", "headers": {"API_KEY": "${MY_SERVICE_KEY}"}}
    assert servers["server-name"]["env"] == {"API_KEY": "${API_KEY}"}
    assert servers["workspace-tool"]["args"] == ["${PWD}/tools/server.py"]
    assert "value-typed-into-cursor" not in default_profile.read_text()
    assert "'remote.example' imported as 'remote-example'" in run.stderr
    assert "not imported: envFile" in run.stderr


def test_windsurf_server_url_and_disabled(default_profile: Path):
    assert llmc("servers", "import", str(SAMPLES / "windsurf_mcp_config.json")).returncode == 0
    servers = imported(default_profile)
    assert servers["figma"] == {"url": "https://your-server-url/mcp", "headers": {"API_KEY": "${FIGMA_API_KEY}"}}
    assert servers["old-one"] == {"command": "uvx", "args": ["mcp-server-time"], "enabled": False, **BOXED}
    assert "<YOUR_PERSONAL_ACCESS_TOKEN>" not in default_profile.read_text()


def test_vscode_inputs_become_environment_placeholders(default_profile: Path):
    run = llmc("servers", "import", str(SAMPLES / "vscode.mcp.json"))
    assert run.returncode == 0, run.stderr
    out = run.json()
    assert out["source"] == "vscode"
    assert {(p["server"], p["variable"]) for p in out["placeholders"]} == {
        ("Perplexity", "PERPLEXITY_KEY"),
        ("my-remote", "API_TOKEN"),
    }
    assert "set ${PERPLEXITY_KEY} for server Perplexity: VS Code input 'perplexity-key' (Perplexity API Key)" in run.stderr
    servers = imported(default_profile)
    assert servers["Perplexity"]["env"] == {"PERPLEXITY_API_KEY": "${PERPLEXITY_KEY}"}
    assert servers["my-remote"] == {
        "url": "http://localhost:3000/sse",
        "transport": "sse",
        "headers": {"X-Token": "${API_TOKEN}"},
    }
    assert servers["github"] == {"url": "https://api.githubcopilot.com/mcp/", "transport": "http"}
    assert servers["fetch"] == {"command": "uvx", "args": ["mcp-server-fetch"], **BOXED}


def test_vscode_user_settings(default_profile: Path):
    assert llmc("servers", "import", str(SAMPLES / "vscode_settings.json")).returncode == 0
    assert imported(default_profile)["memory"]["args"] == ["-y", "@modelcontextprotocol/server-memory"]


def test_dry_run_writes_nothing(default_profile: Path):
    run = llmc("servers", "import", "--dry-run", str(SAMPLES / "vscode.mcp.json"))
    assert run.returncode == 0
    assert run.json()["dryRun"] is True and sorted(run.json()["servers"]) == ["Perplexity", "fetch", "github", "my-remote"]
    assert "would import 4 of 4" in run.stderr
    assert not default_profile.exists()


def test_clashes_are_reported_not_overwritten_unless_replace(isolated_dirs: Path, default_profile: Path):
    profile_file(isolated_dirs / "config", '[servers.github]\nurl = "https://mine.example/mcp"\n')
    before = default_profile.read_text()
    run = llmc("servers", "import", str(SAMPLES / "claude_desktop_config.json"))
    assert run.returncode == 0
    assert run.json()["skipped"] == ["github"] and run.json()["added"] == ["filesystem"]
    assert "server github already in" in run.stderr and "skipped (use --replace)" in run.stderr
    assert imported(default_profile)["github"] == {"url": "https://mine.example/mcp"}
    run = llmc("servers", "import", "--replace", str(SAMPLES / "claude_desktop_config.json"))
    assert run.json()["replaced"] == ["filesystem", "github"] and run.json()["added"] == []
    assert imported(default_profile)["github"]["command"] == "npx"
    assert before != default_profile.read_text()


@pytest.mark.parametrize(
    "content, message",
    [
        ("{not json", "invalid JSON"),
        ('{"something": {}}', "no 'mcpServers' or 'servers' object"),
        ('{"mcpServers": {"x": {"args": []}}}', "server 'x' has neither 'command' nor 'url'"),
        ('{"mcpServers": {"x": "npx"}}', "server 'x': expected an object"),
        ('{"mcpServers": {"a.b": {"command": "x"}, "a/b": {"command": "y"}}}', "two servers become 'a-b'"),
    ],
)
def test_bad_import_files_are_one_line_exit_3(tmp_path: Path, default_profile: Path, content: str, message: str):
    source = tmp_path / "in.json"
    source.write_text(content)
    run = llmc("servers", "import", str(source))
    assert run.returncode == 3 and run.stderr.count("\n") == 1 and message in run.stderr, run.stderr
    assert not default_profile.exists()


@pytest.mark.e2e  # the npm reference servers
def test_imported_servers_work_together(tmp_path: Path):
    """A Claude Desktop file naming two real servers: import, then list and call their tools."""
    python, script = sdk_server("sdk_server.py")
    source = tmp_path / "claude_desktop_config.json"
    source.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "sdk": {"command": python, "args": [script]},
                    "everything": {"command": node_tool("mcp-server-everything")},
                }
            }
        )
    )
    assert llmc("servers", "import", str(source)).returncode == 0
    run = llmc("tools", "list", "-s", "sdk", "-s", "everything")
    assert run.returncode == 0, run.stderr
    servers = {t["server"] for t in run.json()["tools"]}
    assert servers == {"sdk", "everything"}
    call = llmc("call", "sdk.add", "a=2", "b=40", "--text", "--yes", "-s", "sdk", "-s", "everything")  # destructive by default
    assert call.returncode == 0 and call.stdout == "42\n"
