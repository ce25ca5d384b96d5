"""completions/ and man/ match the Click tree; <TAB> completes commands, options, profile,
server and (cached) tool names without starting any server."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import warnings
from pathlib import Path

import click
import pytest

from tests.helpers import ROOT, llmc, llmc_executable, profile_file, sdk_server
from tests.profiles.runner import toml_str

PY, SDK = sdk_server("sdk_server.py")


def generator():
    spec = importlib.util.spec_from_file_location("gen", ROOT / "scripts" / "gen_completions_and_man.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_completions_and_man_pages_are_up_to_date():
    """What the files say, not how the installed Click formats it (see `meaning`)."""
    stale = generator().stale(exact=False)
    assert stale == [], f"stale: {stale}; run: python scripts/gen_completions_and_man.py"


def test_a_change_in_meaning_is_stale_and_one_in_click_formatting_is_not(tmp_path: Path):
    gen = generator()
    gen.write(tmp_path)
    page = tmp_path / "man" / "llmc-servers-add.1"
    original = page.read_text()
    page.write_text(original.replace("Replace a server of the same name.", "Replace it, said a newer Click."))
    assert gen.stale(tmp_path, exact=False) == []
    page.write_text(original.replace("\\fB\\-\\-replace\\fR", "\\fB\\-\\-replaced\\fR"))
    assert gen.stale(tmp_path, exact=False) == ["man/llmc-servers-add.1"]
    script = tmp_path / "completions" / "llmc.bash"
    script.write_text(script.read_text().replace("_LLMC_COMPLETE=bash_complete", "_LLMC_COMPLETE=zsh_complete"))
    assert "completions/llmc.bash" in gen.stale(tmp_path, exact=False)


def test_every_llmc_variable_the_code_reads_is_in_environment():
    import re

    read = {
        m for path in (ROOT / "llmc_cli").rglob("*.py") for m in re.findall(r"\bLLMC_[A-Z_]+\b", path.read_text(encoding="utf-8"))
    }
    listed = {name for names, _ in generator().ENVIRONMENT for name in names.split(", ")}
    assert read and read <= listed, read - listed
    page = generator().man_pages()["man/llmc.1"]
    assert ".SH ENVIRONMENT" in page and ".SH FILES" in page and ".SH EXAMPLES" in page


def test_every_example_names_a_page_and_parses_against_the_commands():
    import shlex

    gen = generator()
    pages = gen.man_pages()
    for page, examples in gen.EXAMPLES.items():
        assert f"man/{page}.1" in pages, page
        for _, line in examples:
            argv = shlex.split(line)
            if argv[0] == "eval":  # eval "$(llmc completion bash)"
                argv = shlex.split(argv[1].removeprefix("$(").removesuffix(")"))
            argv = argv[: argv.index(">")] if ">" in argv else argv  # a redirection is the shell's
            assert argv[0] == "llmc", line
            path = "-".join(["llmc", *_parse(argv[1:])])
            assert page == "llmc" or path == page or path.startswith(page + "-"), (line, path)  # a group: its commands


def _parse(words: list[str]) -> list[str]:
    """Parse argv like `llmc` would, without running it: every option must exist and every
    required argument be there. Returns the command path."""
    from llmc_cli.cli.main import cli

    ctx = cli.make_context("llmc", list(words))
    path: list[str] = []
    while isinstance(ctx.command, click.Group):
        with warnings.catch_warnings():  # Click 8.2 deprecates protected_args; Click 9 puts them in args
            warnings.simplefilter("ignore", DeprecationWarning)
            rest = [*getattr(ctx, "protected_args", []), *ctx.args]
        if not rest:
            break
        name, sub, remaining = ctx.command.resolve_command(ctx, rest)
        path.append(name)
        ctx = sub.make_context(name, remaining, parent=ctx)
    return path


def test_completion_prints_the_script_the_files_hold():
    gen = generator()
    for shell, filename in gen.COMPLETION_FILES.items():
        proc = llmc("completion", shell, timeout=60)
        assert proc.returncode == 0, proc.stderr
        name = f"completions/{filename}"
        assert gen.meaning(name, proc.stdout) == gen.meaning(name, (ROOT / name).read_text())
        assert f"_LLMC_COMPLETE={shell}_complete" in proc.stdout
    bad = llmc("completion", "tcsh", timeout=60)
    assert bad.returncode == 2 and "'tcsh' is not one of" in bad.stderr


def test_generator_covers_every_command_and_check_mode_notices_changes(tmp_path: Path):
    gen = generator()
    pages = gen.man_pages()
    for name in (
        "llmc",
        "llmc-servers",
        "llmc-servers-add",
        "llmc-servers-import",
        "llmc-profiles-init",
        "llmc-tools-list",
        "llmc-call",
    ):
        assert f"man/{name}.1" in pages
    add = pages["man/llmc-servers-add.1"]
    assert add.startswith('.TH "LLMC-SERVERS-ADD" "1"') and "\\fB\\-\\-replace\\fR" in add
    assert ".SH EXIT CODES" in pages["man/llmc.1"]
    gen.write(tmp_path)
    assert gen.stale(tmp_path) == []
    (tmp_path / "man" / "llmc-call.1").write_text("old\n")
    (tmp_path / "man" / "llmc-gone.1").write_text("a command that no longer exists\n")
    assert gen.stale(tmp_path) == ["man/llmc-call.1", "man/llmc-gone.1"]
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_completions_and_man.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr


def complete(words: str, env: dict[str, str] | None = None) -> list[str]:
    """What bash would offer: the installed llmc asked the way completions/llmc.bash asks it."""
    parts = words.split(" ")
    proc = subprocess.run(
        [llmc_executable()],
        capture_output=True,
        text=True,
        timeout=30,
        env={
            **os.environ,
            **(env or {}),
            "COMP_WORDS": words,
            "COMP_CWORD": str(len(parts) - 1),
            "_LLMC_COMPLETE": "bash_complete",
        },
    )
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    return [line.split(",", 1)[1] for line in proc.stdout.splitlines() if line]


@pytest.fixture
def two_profiles(isolated_dirs: Path) -> Path:
    config = isolated_dirs / "config"
    profile_file(
        config, f'[servers.sdk]\ncommand = {toml_str(PY)}\nargs = [{toml_str(SDK)}]\n[servers.spare]\nurl = "https://h/mcp"\n'
    )
    profile_file(config, '[servers.ops]\nurl = "https://h/mcp"\n', "devops")
    return config


def test_commands_options_profiles_and_servers_complete(two_profiles: Path):
    assert complete("llmc ser") == ["serve", "servers"]
    assert "--replace" in complete("llmc servers add x --re")
    assert complete("llmc --profile ") == ["default", "devops"]
    assert complete("llmc servers show s") == ["sdk", "spare"]
    assert complete("llmc tools list -s ") == ["sdk", "spare"]
    assert complete("llmc -p devops servers remove ") == ["ops"]
    assert complete("llmc servers show ", env={"LLMC_PROFILE": "devops"}) == ["ops"]


def test_tool_names_complete_from_the_cache_only(two_profiles: Path):
    assert complete("llmc call ") == []  # nothing cached: no server is started to complete a word
    assert llmc("tools", "list", "-s", "sdk").returncode == 0
    names = complete("llmc call sdk.")
    assert {"sdk.echo", "sdk.add", "sdk.weather"} <= set(names) and all(n.startswith("sdk.") for n in names)
    assert complete("llmc -p devops call ") == []  # the cache is per profile
