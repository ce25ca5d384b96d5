"""Issue 29, "Errors that lead somewhere" and "Commands that do what they look like": each
error a new user meets says what is wrong and how to go on, and each command does what it looks
like. Through the real CLI (in-process where a process proves nothing more)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import llmc, profile_file, sdk_server


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


# -- an unknown server name is a usage error with a suggestion --------------------------------------

UNKNOWN_SERVER = [
    ("tools", "list", "-s", "wrkspace"),
    ("call", "-s", "wrkspace", "workspace.read_file", "path=x"),
    ("resources", "list", "-s", "wrkspace"),
    ("prompts", "list", "-s", "wrkspace"),
    ("ping", "-s", "wrkspace"),
    ("servers", "show", "wrkspace"),
    ("servers", "remove", "wrkspace"),
    ("servers", "disable", "wrkspace"),
    ("auth", "logout", "wrkspace"),
    ("session", "forget", "-s", "wrkspace"),
]


@pytest.mark.parametrize("argv", UNKNOWN_SERVER, ids=[" ".join(a) for a in UNKNOWN_SERVER])
def test_an_unknown_server_is_a_usage_error_with_did_you_mean(isolated_dirs: Path, argv: tuple[str, ...]) -> None:
    llmc("profiles", "init")
    proc = llmc(*argv)
    assert proc.returncode == 2, proc.stderr
    assert "has no server 'wrkspace' (did you mean 'workspace'?)" in one_line(proc.stderr)
    assert proc.stdout == ""


def test_an_unknown_server_far_from_any_lists_the_servers(isolated_dirs: Path) -> None:
    proc = llmc("tools", "list", "-s", "evv")
    assert proc.returncode == 2
    assert "has no server 'evv' (servers: workspace)" in one_line(proc.stderr)


def test_a_session_that_lacks_the_server_says_so_and_how_to_go_on(isolated_dirs: Path) -> None:
    """The session holds only the workspace server: a call of another server names the session,
    what it holds, and the two ways on."""
    started = llmc("session", "start", "dc")
    assert started.returncode == 0, started.stderr
    try:
        for argv in (
            ["call", "everything.echo", "message=hi"],
            ["call", "-s", "everything", "echo"],
            ["call", "everything.read_fil", "path=x"],
        ):
            proc = llmc(*argv, env={"LLMC_SESSION": "dc"})
            assert proc.returncode == 2, proc.stderr
            line = one_line(proc.stderr)
            assert "session dc (in use) does not hold server 'everything' (it holds: workspace)" in line, line
            assert "llmc session start NAME -s everything" in line and "unset LLMC_SESSION" in line, line
    finally:
        llmc("session", "stop", "dc")


# -- serve token create --for-profile: a profile that exists ----------------------------------------


def test_token_for_a_profile_that_does_not_exist_is_refused(isolated_dirs: Path) -> None:
    config = isolated_dirs / "config"
    profile_file(config, '[servers.workspace]\nbuiltin = "workspace"\n', name="ops")
    profile_file(config, '[servers.workspace]\nbuiltin = "workspace"\n', name="readonly")
    before = (config / "profiles" / "ops.toml").read_text()
    proc = llmc("serve", "-p", "ops", "token", "create", "ci-bot", "--for-profile", "readonnly")
    assert proc.returncode == 3 and proc.stdout == "", proc.stderr
    assert "profile not found" in one_line(proc.stderr) and "did you mean 'readonly'?" in proc.stderr
    assert (config / "profiles" / "ops.toml").read_text() == before  # no token written
    made = llmc("serve", "-p", "ops", "token", "create", "ci-bot", "--for-profile", "readonly")
    assert made.returncode == 0 and made.json()["profile"] == "readonly"


# -- prompts get: the prompt's arguments are checked before it is asked for ------------------------

SDK = " ".join(sdk_server("sdk_server.py"))
PROMPT_ERRORS = [
    (["review"], "sdk_server.review: missing required argument 'code'"),
    (["review", "cod=x"], "sdk_server.review: unknown argument 'cod' (did you mean 'code'?)"),
    (["review", "code=x", "language=py"], "unknown argument 'language' (arguments: code)"),
    (["revew", "code=x"], "has no prompt named 'revew' (did you mean 'review'?)"),
]


@pytest.mark.parametrize("argv, message", PROMPT_ERRORS, ids=[" ".join(a) for a, _ in PROMPT_ERRORS])
def test_prompt_arguments_are_checked_first(argv: list[str], message: str) -> None:
    proc = llmc("prompts", "get", *argv, "--stdio", SDK)
    assert proc.returncode == 2, proc.stderr
    assert message in one_line(proc.stderr) and proc.stdout == ""


def test_prompt_arguments_checked_for_a_profile_server(isolated_dirs: Path) -> None:
    profile_file(
        isolated_dirs / "config",
        f'[servers.sdk]\ncommand = "{sdk_server("sdk_server.py")[0]}"\nargs = ["{sdk_server("sdk_server.py")[1]}"]\n',
    )
    proc = llmc("prompts", "get", "sdk.review")
    assert proc.returncode == 2 and "sdk.review: missing required argument 'code'" in one_line(proc.stderr)
    assert llmc("prompts", "get", "sdk.review", "--no-validate").returncode == 6  # the server refuses
    got = llmc("prompts", "get", "sdk.review", "code=x=1")
    assert got.returncode == 0 and "x=1" in got.json()["messages"][0]["content"]["text"]


# -- llmc --help says what serve is -----------------------------------------------------------------


def test_help_describes_serve_as_the_gateway() -> None:
    proc = llmc("--help")
    line = " ".join(proc.stdout.split())
    assert "serve The gateway: a profile's servers as one MCP server" in line


# -- ad-hoc servers are named after what they run -------------------------------------------------


def test_an_adhoc_stdio_server_is_named_after_its_script() -> None:
    proc = llmc("call", "no_such_tool", "--stdio", SDK)
    assert proc.returncode == 2
    assert "server sdk_server has no tool named 'no_such_tool'" in one_line(proc.stderr)
    listed = llmc("tools", "list", "--stdio", SDK).json()["tools"]
    assert {t["server"] for t in listed} == {"sdk_server"}
    assert llmc("call", "sdk_server.add", "a=1", "b=2", "--stdio", SDK).json()["server"] == "sdk_server"


ADHOC_NAMES = [
    ("npx -y @modelcontextprotocol/server-filesystem /srv/data", "server-filesystem"),
    ("npx -y @modelcontextprotocol/server-everything@2025.1.1", "server-everything"),
    ("uvx --from git+https://x/y mcp-server-git==1.0 --repo .", "mcp-server-git"),
    ("python3.12 -m mcp_server_time --local-timezone UTC", "mcp_server_time"),
    ("python my_server.py", "my_server"),
    ("node /opt/desktop-commander/dist/index.js", "desktop-commander"),
    ("docker run -i --rm -e TOKEN=x mcp/fetch", "fetch"),
    ("/usr/local/bin/llmc serve -p ops", "llmc"),
    ("./my.server --flag", "my-server"),
]


@pytest.mark.parametrize("command, name", ADHOC_NAMES)
def test_adhoc_command_names(command: str, name: str) -> None:
    import shlex

    from llmc_cli.cli.targets import command_name

    assert command_name(shlex.split(command)) == name


def test_an_adhoc_url_is_named_after_its_host_and_port() -> None:
    """A refused connection's error names the server by host and port, not 'server'."""
    from tests.helpers import free_port

    port = free_port()
    proc = llmc("tools", "list", "--url", f"http://127.0.0.1:{port}/mcp")
    assert proc.returncode == 5
    assert proc.json()["errors"][0]["server"] == f"127-0-0-1-{port}"
    from llmc_cli.cli.targets import url_name

    assert url_name("https://mcp.example.com/mcp") == "mcp-example-com"


# -- servers add with the command line quoted as one word -------------------------------------------


def test_servers_add_splits_a_quoted_command_line(isolated_dirs: Path) -> None:
    line = " ".join(sdk_server("sdk_server.py"))
    proc = llmc("servers", "add", "sdk2", line)
    assert proc.returncode == 0, proc.stderr
    stored = proc.json()["server"]
    assert stored == {
        "command": sdk_server("sdk_server.py")[0],
        "args": [sdk_server("sdk_server.py")[1]],
        "sandbox": "auto",
        "network": False,
    }
    assert "split the command line" in proc.stderr
    called = llmc("call", "sdk2.add", "a=1", "b=2")  # and it runs
    assert called.returncode == 0 and called.json()["structuredContent"]["result"] == 3, called.stderr
    quoted = llmc("servers", "add", "fs", "npx -y pkg '/srv/my data'")
    assert quoted.json()["server"] == {
        "command": "npx",
        "args": ["-y", "pkg", "/srv/my data"],
        "sandbox": "auto",
        "network": True,
    }
    broken = llmc("servers", "add", "bad", "npx 'unclosed")
    assert broken.returncode == 2 and "No closing quotation" in one_line(broken.stderr)


def test_servers_add_keeps_a_program_whose_path_has_a_space(isolated_dirs: Path, tmp_path: Path) -> None:
    program = tmp_path / "My Tools" / "server"
    program.parent.mkdir()
    program.write_text("#!/bin/sh\n")
    proc = llmc("servers", "add", "mine", "--", str(program), "--flag")
    assert (
        proc.json()["server"] == {"command": str(program), "args": ["--flag"], "sandbox": "auto", "network": False}
        and "split" not in proc.stderr
    )


# -- a nested llmc finds the same profiles and state ---------------------------------------------


@pytest.mark.parametrize("how", ["executable", "module"])
def test_a_nested_llmc_keeps_its_directories(isolated_dirs: Path, tmp_path: Path, how: str) -> None:
    """`llmc call --stdio 'llmc serve -p ops'`: the child's allow-listed environment would drop
    LLMC_CONFIG_DIR (profile not found); relative directories are passed resolved."""
    import sys

    from tests.helpers import llmc_executable

    profile_file(isolated_dirs / "config", '[servers.workspace]\nbuiltin = "workspace"\n', name="ops")
    (tmp_path / "notes.txt").write_text("nested\n")
    inner = f"{llmc_executable()} serve -p ops" if how == "executable" else f"{sys.executable} -P -m llmc_cli serve -p ops"
    # Relative to the outer llmc's cwd; the inner one runs in / (--cwd): only absolute paths reach it.
    env = {"LLMC_CONFIG_DIR": "config", "LLMC_STATE_DIR": "state"}
    proc = llmc(
        "call", "--stdio", inner, "--cwd", "/", "workspace.read_file", f"path={tmp_path / 'notes.txt'}", env=env, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert "nested" in proc.json()["content"][0]["text"]


def test_is_llmc_command(tmp_path: Path) -> None:
    """llmc is judged by what the executable is, not by its name: a program called llmc elsewhere
    is a third-party server (no map of llmc's files, no exemption from a gateway's sandbox)."""
    import sys

    from llmc_cli.config.paths import is_llmc_command
    from tests.helpers import llmc_executable

    assert is_llmc_command([llmc_executable(), "serve", "-p", "ops"])
    assert is_llmc_command([sys.executable, "-P", "-m", "llmc_cli", "serve"]) and is_llmc_command(
        [sys.executable, "-I", "-m", "llmc_cli"]
    )
    assert is_llmc_command([sys.executable, "-P", "-X", "dev", "-m", "llmc_cli.__main__"]) and is_llmc_command(
        [sys.executable, "-I", "-mllmc_cli"]
    )
    assert not is_llmc_command([sys.executable, "-m", "mcp_server_time"]) and not is_llmc_command(["npx", "llmc"])
    impostor = tmp_path / "llmc"
    impostor.write_text("#!/bin/sh\n")
    impostor.chmod(0o755)
    assert not is_llmc_command([str(impostor), "serve"]) and not is_llmc_command(["llmc-other"])


# -- ping: connecting and the round trip apart ------------------------------------------------------


def test_ping_counts_a_slow_start_in_connect_not_in_ping() -> None:
    """A stdio server that takes a second to start: connectMs holds that second, pingMs only the
    round trip, also the second time, when the era cache skips the handshake."""
    slow = f"sh -c 'sleep 1; exec {SDK}'"
    for _ in range(2):
        proc = llmc("ping", "--stdio", slow)
        assert proc.returncode == 0, proc.stderr
        row = proc.json()["servers"][0]
        assert row["connectMs"] >= 1000 and row["pingMs"] < 1000, row
        assert row["serverInfo"]["name"] == "llmc-test-server"


# -- --timeout bounds requests; the handshake has its own bound ------------------------------------


def test_a_short_timeout_does_not_bound_a_slow_start(isolated_dirs: Path) -> None:
    """--timeout 1 for a server that takes 1.5 s to start: the handshake has its own bound, and
    so has the first request when the era cache skipped the handshake (the second run)."""
    slow = f"sh -c 'sleep 1.5; exec {SDK}'"
    cut = llmc("call", "add", "a=1", "b=2", "--connect-timeout", "0.5", "--stdio", slow)
    assert cut.returncode == 7, cut.stderr
    for _ in range(2):
        proc = llmc("call", "add", "a=1", "b=2", "--timeout", "1", "--stdio", slow)
        assert proc.returncode == 0, proc.stderr
        assert proc.json()["structuredContent"]["result"] == 3


def test_connect_timeout_in_the_profile(isolated_dirs: Path) -> None:
    argv = ["sh", "-c", f"sleep 1.5; exec {SDK}"]
    # not sandboxed: `sh -c` runs a python bubblewrap would not know to show it
    added = llmc("servers", "add", "slow", "--connect-timeout", "0.5", "--sandbox", "none", "--", *argv)
    assert added.json()["server"]["connect_timeout"] == 0.5
    assert llmc("call", "slow.add", "a=1", "b=2").returncode == 7
    assert llmc("call", "slow.add", "a=1", "b=2", "--connect-timeout", "30").returncode == 0


# -- a confirmation refused for want of a terminal prints the real approve command ------------------


def sdk_profile(config: Path, extra: str = "") -> Path:
    python, script = sdk_server("sdk_server.py")
    return profile_file(config, f'[servers.sdk]\ncommand = "{python}"\nargs = ["{script}"]\n{extra}')


def test_the_refusal_prints_the_command_that_approves_this_call(isolated_dirs: Path) -> None:
    import shlex

    sdk_profile(isolated_dirs / "config", '[policy]\nconfirm = ["sdk.echo"]\n')
    args = ("sdk.echo", 'message=it\'s a "quoted" $HOME')
    refused = llmc("call", *args)
    assert refused.returncode == 4, refused.stderr
    line = one_line(refused.stderr)
    assert "..." not in line
    command = line.split("pre-approve this exact call: ", 1)[1].rsplit(" (", 1)[0]
    argv = shlex.split(command)
    assert argv[:5] == ["llmc", "-p", "default", "policy", "approve"] and argv[-1] == "--write"
    approved = llmc(*argv[1:])  # pasted as printed
    assert approved.returncode == 0, approved.stderr
    assert approved.json()["arguments"] == {"message": 'it\'s a "quoted" $HOME'}
    ran = llmc("call", *args)
    assert ran.returncode == 0 and ran.json()["content"][0]["text"] == 'it\'s a "quoted" $HOME', ran.stderr


def test_the_refusal_gives_the_hash_when_an_argument_holds_a_secret(isolated_dirs: Path) -> None:
    sdk_profile(isolated_dirs / "config", '[policy]\nconfirm = ["sdk.echo"]\n')
    refused = llmc("call", "sdk.echo", "message=hunter2-secret-value", env={"SERVICE_API_TOKEN": "hunter2-secret-value"})
    assert refused.returncode == 4
    line = one_line(refused.stderr)
    assert "hunter2" not in line and "policy approve" not in line
    assert "holds a secret" in line and "hmac-sha256:" in line, line


# -- a 401 from a server without OAuth names the header it wants -------------------------------------


def test_a_gateway_that_wants_a_bearer_token_gets_header_advice(isolated_dirs: Path) -> None:
    """The real gateway with a principal (a static token, no OAuth): the advice is the header,
    and with that header the same command works."""
    from tests.gateway.test_http import start, stop

    path = profile_file(
        isolated_dirs / "config",
        '[servers.workspace]\nbuiltin = "workspace"\n[serve.principals.ci]\ntoken_env = "GW_CI_TOKEN"\n',
        name="gw",
    )
    token = "a-long-random-token-for-the-test-0123456789"
    gateway = start(path, env={"GW_CI_TOKEN": token})
    try:
        proc = llmc("tools", "list", "--url", gateway.url)
        assert proc.returncode == 9, proc.stderr
        error = proc.json()["errors"][0]["message"]
        assert "--header 'Authorization: Bearer ${TOKEN}'" in error and "publishes no OAuth metadata" in error, error
        assert error.index("--header") < error.index("llmc auth login")
        # Where a browser could be opened, no login is tried against endpoints nobody published.
        browser = llmc("tools", "list", "--url", gateway.url, env={"BROWSER": "true"})
        assert browser.returncode == 9 and "--header 'Authorization: Bearer ${TOKEN}'" in browser.stderr
        ok = llmc(
            "tools", "list", "--url", gateway.url, "--header", "Authorization: Bearer ${GW_CI_TOKEN}", env={"GW_CI_TOKEN": token}
        )
        assert ok.returncode == 0 and ok.json()["tools"], ok.stderr
    finally:
        stop(gateway)


# -- resources: SERVER.URI as the gateway names them, SERVER:URI as an alias ------------------------


@pytest.mark.parametrize("spelling", ["sdk.test://greeting", "sdk:test://greeting"])
def test_resources_read_takes_the_gateways_spelling(isolated_dirs: Path, spelling: str) -> None:
    sdk_profile(isolated_dirs / "config", '[servers.workspace]\nbuiltin = "workspace"\n')
    proc = llmc("resources", "read", spelling)
    assert proc.returncode == 0, proc.stderr
    assert proc.json()["server"] == "sdk" and proc.json()["contents"][0]["text"] == "hello from a resource"


def test_resources_read_without_a_server_names_the_one_spelling(isolated_dirs: Path) -> None:
    sdk_profile(isolated_dirs / "config", '[servers.workspace]\nbuiltin = "workspace"\n')
    proc = llmc("resources", "read", "test://greeting")
    assert proc.returncode == 2
    assert "name the server: SERVER.URI (servers: sdk, workspace)" in one_line(proc.stderr)
    assert "SERVER.URI" in llmc("resources", "read", "--help").stdout


def test_a_uri_scheme_is_not_taken_for_a_server() -> None:
    """One ad-hoc server: the URI's own scheme is the URI's, whatever the server is named."""
    proc = llmc("resources", "read", "test://greeting", "--stdio", SDK)
    assert proc.returncode == 0 and proc.json()["contents"][0]["text"] == "hello from a resource"
    dotted = llmc("resources", "read", "sdk_server.test://greeting", "--stdio", SDK)
    assert dotted.returncode == 0 and dotted.json()["contents"][0]["text"] == "hello from a resource"


def test_an_adhoc_env_value_expands_variables_like_a_header(isolated_dirs):
    """`--env 'K=${VAR}'` expands from llmc's environment, as `--header` and a profile's env do, so a
    secret need not be in the command line `ps` shows; an unset variable is exit 3 naming it."""
    server = "sh -c 'echo got=$GREETING >&2; exit 3'"  # a server that says what it was given, then dies
    proc = llmc("tools", "list", "--stdio", server, "--env", "GREETING=${SOURCE}", env={"SOURCE": "hello"})
    assert proc.returncode == 5 and "got=hello" in proc.stderr, proc.stderr
    proc = llmc("tools", "list", "--stdio", server, "--env", "GREETING=${SOURCE}", env={"SOURCE": None})
    assert proc.returncode == 3 and proc.stderr == "llmc: --env GREETING: environment variable SOURCE is not set\n"
