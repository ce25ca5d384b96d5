"""An optional dependency that is not installed (psycopg for `[state] url`, PyJWT for the
gateway's `[serve.oauth]`, OpenTelemetry for `--otel`) is one line naming the extra to install,
exit 3, never an ImportError traceback. The module is made unimportable in the llmc process by a
meta-path blocker (sitecustomize on PYTHONPATH), as an install without that extra would be."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import free_port, llmc_process, profile_file

# Processes: the blocker is a sitecustomize on PYTHONPATH, read only when an interpreter starts.

BLOCKER = '''
import os, sys

class _Blocked:
    """Stands for an install without an extra: these modules cannot be imported."""

    def find_spec(self, name, path=None, target=None):
        for blocked in os.environ["LLMC_TEST_BLOCK"].split(","):
            if name == blocked or name.startswith(blocked + "."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _Blocked())
'''


def without(tmp_path: Path, *modules: str) -> dict[str, str]:
    """The environment of an llmc that cannot import `modules`."""
    folder = tmp_path / "blocker"
    folder.mkdir(exist_ok=True)
    (folder / "sitecustomize.py").write_text(BLOCKER)
    return {"PYTHONPATH": str(folder), "LLMC_TEST_BLOCK": ",".join(modules)}


def one_line(proc, extra: str) -> None:
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.strip().count("\n") == 0, proc.stderr
    assert f"pip install 'llmc-cli[{extra}]'" in proc.stderr and proc.stdout == "", proc.stderr


STATE_COMMANDS = [
    ("call", "workspace.list_directory", "path=."),
    ("audit", "tail"),
    ("audit", "verify"),
    ("state", "migrate"),
    ("policy", "approve", "workspace.list_directory", "path=.", "--write"),
]


@pytest.mark.parametrize("argv", STATE_COMMANDS, ids=[" ".join(a) for a in STATE_COMMANDS])
def test_state_url_without_psycopg(tmp_path: Path, argv: tuple[str, ...]) -> None:
    env = {**without(tmp_path, "psycopg"), "LLMC_STATE_URL": "postgresql://llmc@127.0.0.1:1/llmc"}
    proc = llmc_process(*argv, env=env, cwd=tmp_path)
    one_line(proc, "postgres")
    assert "LLMC_STATE_URL" in proc.stderr


def test_profile_state_url_without_psycopg(isolated_dirs: Path, tmp_path: Path) -> None:
    profile_file(
        isolated_dirs / "config",
        '[state]\nurl = "postgresql://llmc@127.0.0.1:1/llmc"\n[servers.workspace]\nbuiltin = "workspace"\n',
    )
    proc = llmc_process("call", "workspace.list_directory", "path=.", env=without(tmp_path, "psycopg"), cwd=tmp_path)
    one_line(proc, "postgres")


@pytest.mark.parametrize("module", ["jwt", "cryptography"])
def test_gateway_oauth_without_pyjwt(isolated_dirs: Path, tmp_path: Path, module: str) -> None:
    path = profile_file(
        isolated_dirs / "config",
        '[servers.workspace]\nbuiltin = "workspace"\n'
        '[serve.oauth]\nissuer = "https://as.example/as"\nresource = "http://127.0.0.1:1/mcp"\n'
        'profiles = { alice = "default" }\n',
    )
    proc = llmc_process("serve", "-p", str(path), "--http", f"127.0.0.1:{free_port()}", env=without(tmp_path, module))
    one_line(proc, "oauth")


def test_otel_without_the_sdk(tmp_path: Path) -> None:
    proc = llmc_process(
        "--otel", "call", "workspace.list_directory", "path=.", env=without(tmp_path, "opentelemetry"), cwd=tmp_path
    )
    one_line(proc, "otel")
