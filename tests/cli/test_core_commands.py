"""The core commands as a user runs them: the installed `llmc` in a subprocess, real servers,
JSON on stdout, one line on stderr, the documented exit code, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import llmc, llmc_executable, node_tool, sdk_server
from tests.processes import gone, live_processes

MISBEHAVING = str(Path(__file__).resolve().parents[1] / "peers" / "misbehaving_stdio.py")
SDK = " ".join(sdk_server("sdk_server.py"))


@pytest.mark.e2e  # the npm reference servers
def test_tools_list_prints_the_tools_as_the_server_sent_them():
    proc = llmc("tools", "list", "--stdio", node_tool("mcp-server-everything"))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["errors"] == []
    echo = next(t for t in data["tools"] if t["name"] == "echo")
    assert echo["server"] == "mcp-server-everything" and echo["inputSchema"]["properties"]["message"]["type"] == "string"


@pytest.mark.e2e  # the npm reference servers
def test_call_types_arguments_by_the_schema_and_reports_duration():
    proc = llmc("call", "get-sum", "a=2", "b=3", "--stdio", node_tool("mcp-server-everything"), "--yes")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["content"][0]["text"] == "The sum of 2 and 3 is 5."
    assert out["isError"] is False and out["tool"] == "get-sum" and out["durationMs"] >= 0


def test_call_text_json_file_and_stdin(tmp_path):
    args_file = tmp_path / "args.json"
    args_file.write_text('{"message": "from a file"}')
    assert llmc("call", "echo", "--json", f"@{args_file}", "--text", "--stdio", SDK, "--yes").stdout == "from a file\n"
    assert (
        llmc("call", "echo", "--json", "-", "--text", "--stdio", SDK, "--yes", stdin='{"message": "from stdin"}').stdout
        == "from stdin\n"
    )
    assert llmc("call", "add", "a:=40", "b:=2", "--text", "--stdio", SDK, "--yes").stdout == "42\n"


def test_a_tool_error_is_exit_1_with_the_result_on_stdout():
    proc = llmc("call", "fail", "reason=nope", "--stdio", SDK, "--yes")
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["isError"] is True
    assert proc.stderr.count("\n") == 1 and "reported an error" in proc.stderr


@pytest.mark.parametrize(
    "args, code, message",
    [
        (["call", "add", "a=x", "b=1"], 2, "not a valid integer"),
        (["call", "echo", "--json", "{broken"], 2, "invalid JSON"),
        (["call", "echo", "--json", "[1]"], 2, "must be a JSON object"),
        (["call", "echo", "message"], 2, "not KEY=VALUE"),
    ],
)
def test_bad_arguments_are_usage_errors(args, code, message):
    proc = llmc(*args, "--stdio", SDK)
    assert proc.returncode == code and message in proc.stderr and proc.stdout == ""


def test_a_dead_server_is_exit_5_with_a_one_line_reason():
    proc = llmc("tools", "list", "--stdio", "/no/such/server")
    assert proc.returncode == 5
    assert json.loads(proc.stdout)["errors"][0]["message"].endswith("command not found: /no/such/server")


def test_a_crash_mid_call_is_exit_5_and_shows_the_servers_stderr():
    proc = llmc("call", "echo", "message=x", "--stdio", f"{sys.executable} {MISBEHAVING} crash", "--yes")
    assert proc.returncode == 5 and "simulated crash" in proc.stderr


def test_a_server_that_never_answers_is_exit_7():
    proc = llmc("tools", "list", "--timeout", "1", "--stdio", f"{sys.executable} {MISBEHAVING} silent")
    assert proc.returncode == 7  # the only server timed out: its own code
    assert json.loads(proc.stdout)["errors"][0]["exitCode"] == 7


def test_no_common_version_is_exit_6():
    proc = llmc("call", "echo", "--stdio", f"{sys.executable} {MISBEHAVING} bad-version")
    assert proc.returncode == 6 and "1999-01-01" in proc.stderr


def test_resources_prompts_and_ping():
    ping = json.loads(llmc("ping", "--stdio", SDK).stdout)["servers"][0]
    assert ping["era"] == "modern" and ping["serverInfo"]["name"] == "llmc-test-server"
    resources = json.loads(llmc("resources", "list", "--stdio", SDK).stdout)["resources"]
    assert resources[0]["uri"] == "test://greeting"
    read = json.loads(llmc("resources", "read", "test://greeting", "--stdio", SDK).stdout)
    assert read["contents"][0]["text"] == "hello from a resource"
    prompt = json.loads(llmc("prompts", "get", "review", "code=x=1", "--stdio", SDK).stdout)
    assert "x=1" in prompt["messages"][0]["content"]["text"]


def test_help_and_version_do_not_import_heavy_packages():
    code = (
        "import sys; from llmc_cli.cli.main import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('httpx2', 'pydantic', 'openai', 'anthropic', 'google.genai', 'mcp', 'opentelemetry') if m in sys.modules]\n"
        "print('HEAVY', heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30).stdout
    assert "HEAVY []" in out


def test_ctrl_c_cancels_stops_the_server_and_exits_130():
    import signal
    import threading

    # -v: a line per progress notification, so the test knows the call is running (no sleep).
    proc = subprocess.Popen(
        [llmc_executable(), "-v", "call", "slow", "seconds=30", "--stdio", SDK, "--yes"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    running = threading.Event()

    def read_stderr() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:  # ends when llmc exits
            lines.append(line)
            if line.startswith("[progress]"):
                running.set()

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    assert running.wait(60), "".join(lines)
    children = [p.pid for p in live_processes() if p.ppid == proc.pid]
    assert children, "the server should be running"
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=15)
    reader.join(timeout=15)
    stderr = "".join(lines)
    assert proc.returncode == 130 and "interrupted" in stderr and "Traceback" not in stderr
    for pid in children:
        assert gone(pid), f"server {pid} outlived llmc"
