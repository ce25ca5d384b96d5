"""Every command line in the README's shell code blocks runs here, so an example can never drift
from the code: through bash (pipes, `&&`, `~` and `$(...)` as a user's shell has them), with the
installed llmc first on PATH, in a fresh world per code block (HOME, config and state in a temp
dir), the example servers swapped for the test peers (SUBSTITUTIONS), and each line's exit code
asserted. A line that cannot run here is in NOT_RUN with the reason; a NOT_RUN entry the README
no longer has fails, as does a relative link that does not resolve inside the repository. The
README's profile snippets (TOML blocks) must load as llmc loads a profile."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.auth.fake_oauth import FakeOAuthServer
from tests.fakes.llm import FakeLLM, anthropic_reply, chat_reply
from tests.helpers import (
    NODE_BIN,
    PEERS,
    ROOT,
    desktop_commander,
    free_port,
    llmc_executable,
    node_tool,
    sdk_server,
    wait_listening,
)

pytestmark = pytest.mark.e2e  # the README's command lines run by a shell, against npm and SDK peers

README = ROOT / "README.md"
LINE_TIMEOUT = 120.0

# Lines (as written, without their comment) that do not run here, and why.
NOT_RUN = {
    "python3 -m pip install . && llmc tools list": "installs the package; these tests run the installed llmc "
    "(`llmc tools list` runs in the workspace section)",
    "bash scripts/test.sh": "the whole test suite, this test included",
    "bash scripts/test.sh tests/mcp -x": "the test suite again",
    "bash scripts/test.sh -n 0": "the test suite again, serially",
    "bash scripts/test.sh -m 'not e2e'": "the test suite again, its fast part",
    "(cd bench/node && npm install) && .venv/bin/python bench/peers.py --runs 10": "installs npm packages, then a benchmark",
    "pip install 'llmc-cli[postgres]'": "installs a package (the test environment has psycopg already)",
    "pip install 'llmc-cli[otel]'": "installs a package (the test environment has the OpenTelemetry SDK already)",
    "llmc state migrate": "needs the PostgreSQL server at db.internal the example names (tests/state migrates a real one)",
    "llmc auth login erp --no-browser": "waits until a person opens the URL it prints "
    "(tests/auth/test_auth_cli.py plays that person)",
    "llmc serve -p ops --http 0.0.0.0:8443 --tls-cert gw.pem --tls-key gw-key.pem": "HTTPS on a public address: needs the "
    "reader's certificate and a principal (tests/gateway/test_tls.py serves HTTPS with certificates made at test time)",
    "llmc serve -p ops --http 127.0.0.1:8765 --workers auto": "the line above with one worker per CPU, on the port "
    "the line above holds (tests/gateway/test_workers.py runs workers)",
    "llmc call SERVER.TOOL key=value ...": "a synopsis: SERVER.TOOL, TOOL and ... are placeholders",
    'llmc call TOOL key:=\'{"raw": "json"}\'': "a synopsis",
    "llmc call TOOL --json '{\"a\": 1}'": "a synopsis",
    "llmc call TOOL ... --text": "a synopsis",
}

# Lines starting so that do not run here, and why.
NOT_RUN_PREFIXES = {
    ".venv/bin/python bench/": "a benchmark: minutes of load on a shared machine",
}


def not_run(command: str) -> bool:
    return command in NOT_RUN or command.startswith(tuple(NOT_RUN_PREFIXES))


# Lines that serve until stopped: started in the background, ready when their port answers,
# stopped when the block ends. The lines after them use them.
BACKGROUND = {"llmc serve -p ops --http 127.0.0.1:8765", "llmc serve -p ops --http 127.0.0.1:8765 --workers 2"}

# The first word of a shell line; a code block whose first line starts otherwise is not shell
# (TOML, the layout listing).
SHELL_WORDS = ("llmc", "python3", "bash", "export", "cp", "eval", "echo", "pip", ".venv/bin/python", "(cd")


@dataclass
class Line:
    number: int  # in README.md
    text: str  # as written, comment included

    @property
    def command(self) -> str:
        """The line without its trailing comment (a `#` after whitespace, outside quotes)."""
        cut = _comment_start(self.text)
        return self.text[:cut].rstrip() if cut is not None else self.text.strip()


def _comment_start(text: str) -> int | None:
    quote = None
    for i, c in enumerate(text):
        if quote:
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or text[i - 1].isspace()):
            return i
    return None


@dataclass
class Block:
    section: str  # the nearest heading above it
    lines: list[Line] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"line {self.lines[0].number}: {self.section}"


def code_blocks(text: str) -> list[Block]:
    """Every indented code block, dedented, with the nearest heading above it."""
    blocks: list[Block] = []
    section = ""
    current: list[tuple[int, str]] = []
    previous_blank = True

    def close() -> None:
        lines = [(n, t) for n, t in current if t.strip()]
        if lines:
            indent = min(len(t) - len(t.lstrip()) for _, t in lines)
            blocks.append(Block(section, [Line(n, t[indent:]) for n, t in lines]))
        current.clear()

    for number, raw in enumerate(text.splitlines(), 1):
        if raw.startswith("#"):
            close()
            section = raw.lstrip("#").strip()
        elif (raw.startswith("    ") and (current or previous_blank)) or (not raw.strip() and current):
            current.append((number, raw))
        else:
            close()
        previous_blank = not raw.strip()
    close()
    return blocks


def shell_blocks(text: str) -> list[Block]:
    """Code blocks whose first line is a shell command, one Line per command line (comment-only
    continuation lines dropped)."""
    return [
        Block(b.section, [line for line in b.lines if not line.text.lstrip().startswith("#")])
        for b in code_blocks(text)
        if b.lines[0].text.startswith(SHELL_WORDS)
    ]


BLOCKS = shell_blocks(README.read_text(encoding="utf-8"))


class World:
    """One code block's world: a home, the data folder the examples name, the profiles they
    use, and the servers they talk to, each started when a line first needs it."""

    def __init__(self, root: Path, section: str, stack: ExitStack) -> None:
        self.root, self.section, self.stack = root, section, stack
        self.home, self.data, self.work = root / "home", root / "data", root / "work"
        for directory in (
            self.home / ".config" / "fish" / "completions",
            self.home / ".zfunc",
            self.home / ".local" / "share" / "bash-completion" / "completions",
            self.data,
            self.work,
        ):
            directory.mkdir(parents=True)  # where a user of that shell has them
        (self.data / "errors.log").write_text("12:00 disk full\n12:05 disk full again\n")
        (self.data / "notes.txt").write_text("alpha\nbeta\n")
        shutil.copy(README, self.work / "README.md")
        (self.work / "notes.txt").write_text("a note\n")
        (self.work / "calls.jsonl").write_text(
            json.dumps({"id": 1, "tool": "workspace.read_file", "arguments": {"path": "notes.txt"}})
            + "\n"
            + json.dumps({"id": 2, "tool": "workspace.list_directory", "arguments": {"path": "."}})
            + "\n"
        )
        (self.work / "completions").symlink_to(ROOT / "completions")
        claude = self.home / ".config" / "Claude"
        claude.mkdir(parents=True)
        (claude / "claude_desktop_config.json").write_text(
            json.dumps({"mcpServers": {"notes": {"command": sys.executable, "args": [str(PEERS / "sdk_server.py")]}}})
        )
        self.gateway_port = free_port()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("LLMC_", "XDG_"))}
        self.env.update(
            HOME=str(self.home),
            TOKEN="a-token",
            ERP_TOKEN="an-erp-token",
            NO_COLOR="1",
            PATH=os.pathsep.join([str(Path(llmc_executable()).parent), str(NODE_BIN), os.environ["PATH"]]),
        )
        self._started: dict[str, Any] = {}
        self.captured: list[tuple[str, str]] = []
        profiles = self.home / ".config" / "llmc" / "profiles"  # where llmc looks without LLMC_CONFIG_DIR
        profiles.mkdir(parents=True)
        fs = (
            f"command = {_toml(node_tool('mcp-server-filesystem'))}\nargs = [{_toml(str(self.data))}]\n"
            f"cwd = {_toml(str(self.data))}\n"
        )
        (profiles / "ops.toml").write_text(f'description = "Operations"\n[servers.fs]\n{fs}')
        (profiles / "readonly.toml").write_text(
            f'description = "Read-only analyst"\n[servers.fs]\n{fs}[policy]\nread_only = true\n'
        )
        default = DEFAULT_PROFILES.get(section)
        if default:
            (profiles / "default.toml").write_text(default(self, fs))

    def once(self, key: str, start: Callable[[], Any]) -> Any:
        if key not in self._started:
            self._started[key] = start()
        return self._started[key]

    def serve(self, argv: list[str], env: dict[str, str] | None = None) -> int:
        port = free_port()
        argv = [a.replace("{port}", str(port)) for a in argv]
        self.background(argv, port, {**self.env, **(env or {}), "PORT": str(port)})
        return port

    def shell(self, command: str, where: str) -> subprocess.CompletedProcess[str]:
        """A documented line run as a user's shell runs it (bash, -e and pipefail) in the working
        directory with the world's environment; it must exit 0 without a traceback."""
        proc = subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", command],
            cwd=self.work,
            env=self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=LINE_TIMEOUT,
        )
        assert "Traceback" not in proc.stderr, f"{where}\n{proc.stderr}"
        assert proc.returncode == 0, f"{where}\nexit {proc.returncode}\n{proc.stderr[-3000:]}\n{proc.stdout[-2000:]}"
        return proc

    def background(self, argv: list[str] | str, port: int, env: dict[str, str]) -> None:
        proc = subprocess.Popen(
            argv,
            shell=isinstance(argv, str),
            executable="/bin/bash" if isinstance(argv, str) else None,
            cwd=self.work,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        self.stack.callback(_stop, proc)
        wait_listening(proc, port, argv)

    def sdk_url(self) -> str:
        return self.once(
            "sdk",
            lambda: f"http://127.0.0.1:{self.serve([*sdk_server('sdk_server.py'), 'streamable-http', '--port', '{port}'])}/mcp",
        )

    def everything_url(self) -> str:
        return self.once(
            "everything", lambda: f"http://127.0.0.1:{self.serve([node_tool('mcp-server-everything'), 'streamableHttp'])}/mcp"
        )

    def oauth(self) -> FakeOAuthServer:
        def start() -> FakeOAuthServer:
            self.env["BROWSER"] = str(ROOT / "tests" / "auth" / "browser.py")  # follows the redirect, as a person's browser
            return self.stack.enter_context(FakeOAuthServer())

        return self.once("oauth", start)

    def chat_llm(self) -> str:
        """The OpenAI-compatible local server of the examples (`--provider openai` and `text`)."""
        return self.once(
            "chat", lambda: self.stack.enter_context(FakeLLM("openai", [chat_reply(content="Forty-two.")] * 2))
        ).base_url

    def anthropic(self) -> None:
        def start() -> FakeLLM:
            fake = self.stack.enter_context(FakeLLM("anthropic", [anthropic_reply(text="The disk is full.")] * 4))
            self.env["ANTHROPIC_BASE_URL"] = fake.base_url  # the SDK's own variable: the example line stays as written
            return fake

        self.once("anthropic", start)


def _toml(value: str) -> str:
    return json.dumps(value)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    if proc.stderr:
        proc.stderr.close()


# The default profile a section's examples assume (the others use none: the built-in workspace).
DEFAULT_PROFILES: dict[str, Callable[[World, str], str]] = {
    "Sessions: servers that outlive one command": lambda w, fs: (
        f"[servers.dc]\ncommand = {_toml(desktop_commander()[0])}\nargs = [{_toml(desktop_commander()[1])}]\n"
    ),
    "Asking an LLM": lambda w, fs: (
        f'[servers.fs]\n{fs}[servers.erp]\nurl = "{w.sdk_url()}"\n[llm]\nprovider = "anthropic"\nmodel = "claude-sonnet-4-5"\n'
    ),
    "Authorization": lambda w, fs: f'[servers.erp]\nurl = "{w.oauth().mcp_url}"\n',
}

# Example servers, addresses and profiles -> the test peers (each started when first named).
SUBSTITUTIONS: list[tuple[str, Callable[[World], str]]] = [
    ("npx -y @modelcontextprotocol/server-filesystem", lambda w: node_tool("mcp-server-filesystem")),
    ("/srv/data", lambda w: str(w.data)),
    ("https://mcp.example.com/mcp", lambda w: w.oauth().mcp_url if w.section == "Authorization" else w.sdk_url()),
    ("https://erp.example.com/mcp", lambda w: w.sdk_url()),
    ("http://127.0.0.1:3001/mcp", lambda w: w.everything_url()),
    ("python my_server.py", lambda w: shlex.join(sdk_server("sdk_server.py"))),
    ("127.0.0.1:8765", lambda w: f"127.0.0.1:{w.gateway_port}"),
    ("http://localhost:11434/v1", lambda w: w.chat_llm()),
]

# A value a line prints that a later line of the example uses: (line contains, regex on stdout,
# the placeholder the README writes for it).
CAPTURES = [("dc.start_process", r"PID (\d+)", "pid=1234")]


def run_block(block: Block, tmp_path: Path) -> None:
    with ExitStack() as stack:
        world = World(tmp_path, block.section, stack)
        for line in block.lines:
            command = line.command
            if not_run(command):
                continue
            for example, replacement in SUBSTITUTIONS:
                if example in command:
                    command = command.replace(example, replacement(world))
            for placeholder, value in world.captured:
                command = command.replace(placeholder, value)
            if "llmc ask" in command:
                world.anthropic()
            where = f"README.md line {line.number}: {line.text.strip()}\n  ran: {command}"
            if command.startswith("export "):
                name, _, value = command.removeprefix("export ").partition("=")
                world.env[name] = shlex.split(value)[0] if value else ""
                continue
            if line.command in BACKGROUND:
                world.background(command, world.gateway_port, world.env)
                continue
            proc = world.shell(command, where)
            for needle, pattern, placeholder in CAPTURES:
                if needle in command:
                    found = re.search(pattern, proc.stdout)
                    assert found, f"{where}\nno {pattern!r} in {proc.stdout[-2000:]}"
                    world.captured.append((placeholder, placeholder.split("=")[0] + "=" + found.group(1)))


# A block runs several lines, each bounded by LINE_TIMEOUT: the suite-wide 120 s cut a three-line
# block (30 s quiet) in its teardown when two suites shared the 2 cores (load 15).
@pytest.mark.timeout(3 * LINE_TIMEOUT)
@pytest.mark.parametrize("block", BLOCKS, ids=[b.name for b in BLOCKS])
def test_readme_example_block_runs(block: Block):
    # A short root: a session keeper's socket path (in ~/.local/state) must fit a Unix socket.
    root = Path(tempfile.mkdtemp(prefix="rd", dir="/tmp"))
    try:
        run_block(block, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_the_readme_has_the_shell_blocks_and_every_not_run_line():
    commands = {line.command for block in BLOCKS for line in block.lines}
    assert len(BLOCKS) >= 10 and sum(len(b.lines) for b in BLOCKS) >= 50
    assert set(NOT_RUN) <= commands, set(NOT_RUN) - commands  # a line the README dropped: drop it here too
    assert all(any(c.startswith(p) for c in commands) for p in NOT_RUN_PREFIXES)
    assert commands >= BACKGROUND, BACKGROUND - commands


TOML_BLOCKS = [b for b in code_blocks(README.read_text(encoding="utf-8")) if b.lines[0].text.startswith("[")]


@pytest.mark.parametrize("block", TOML_BLOCKS, ids=[b.name for b in TOML_BLOCKS])
def test_readme_profile_snippet_is_valid(block: Block):
    """A profile fragment in the README loads as llmc loads profiles (a server table that shows
    only its `oauth` part gets a url: the fragment is about the rest)."""
    import tomllib

    from llmc_cli.config.validation import validate

    data = tomllib.loads("\n".join(line.text for line in block.lines))
    for server in data.get("servers", {}).values():
        if "command" not in server and "builtin" not in server:
            server.setdefault("url", "https://mcp.example.com/mcp")
    validate(data, f"README.md line {block.lines[0].number}")


def test_every_relative_link_resolves_inside_the_repository():
    text = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    for target in targets:
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            continue  # a URL or an anchor
        path = (ROOT / target.split("#")[0]).resolve()
        assert path.is_relative_to(ROOT) and path.exists(), f"README link {target} does not resolve in the repository"
    outside = re.findall(r"`(\.\./[\w./-]+\.\w+)`", text)
    assert not outside, f"README names files outside the repository: {outside}"
