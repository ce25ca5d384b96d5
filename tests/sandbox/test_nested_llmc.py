"""Issue 35: a nested gateway hides an unsandboxed server, and what is "llmc itself" can be faked.

A gateway with principals refuses a third-party stdio server that would run unsandboxed (unless
its profile says sandbox = "none"); llmc itself is exempt. The rule holds through llmc's own
children at any depth (LLMC_REQUIRE_SANDBOX, given only to them): a nested `llmc serve -p
inner`, a keeper it would start, refuse as the gateway would. And llmc itself is what this
interpreter with `-m llmc_cli` (isolated from the current directory) or the `llmc` beside it
runs, with nothing that runs other code: `python -c CODE -m llmc_cli` or `llmc` with a
PYTHONPATH of the server's choosing is a third-party server (no exemption, no map of llmc's
files, no LLMC_STATE_DIR). The hostile server is tests/peers/sandbox_prober.py."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.helpers import PEERS, free_port, llmc, llmc_executable

PROBER = f"command = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(PEERS / 'sandbox_prober.py'))}]\n"
TOKEN = "t" * 32
NO_CONFIRM = "\n[policy]\nconfirm_destructive = false\n"  # the control case reaches the server
PRINCIPALS = '\n[serve.principals.ci]\ntoken_env = "GW_T"\n'


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def nested(name: str, inner: Path) -> str:
    return f"[servers.{name}]\ncommand = {json.dumps(llmc_executable())}\nargs = {json.dumps(['serve', '-p', str(inner)])}\n"


@pytest.mark.e2e  # a real gateway process, llmc children two deep
def test_a_nested_gateway_does_not_hide_an_unsandboxed_server(tmp_path: Path) -> None:
    """outer (principals) -> `llmc serve -p middle` -> `llmc serve -p inner` -> the prober,
    unsandboxed: the innermost llmc refuses to start it, so a principal's call cannot read the
    approval key; with sandbox = "none" said in the inner profile, the risk is the profile's."""
    from llmc_cli.policy.approval import approval_key
    from tests.gateway.test_http import start, stop

    approval_key()
    key_file = Path(os.environ["LLMC_STATE_DIR"]) / "approval.key"
    key = key_file.read_text().strip()
    for table, reached in [("", False), ('sandbox = "none"\n', True)]:
        inner = write(tmp_path / "inner.toml", "[servers.p]\n" + PROBER + table + NO_CONFIRM)
        middle = write(tmp_path / "middle.toml", nested("inner", inner) + NO_CONFIRM)
        outer = write(tmp_path / "outer.toml", nested("middle", middle) + NO_CONFIRM + PRINCIPALS)
        running = start(outer, env={"GW_T": TOKEN})
        try:
            called = llmc(
                "call", "--url", running.url, "--header", f"Authorization: Bearer {TOKEN}",
                "middle.inner.p.read", "--json", json.dumps({"path": str(key_file)}),
            )  # fmt: skip
        finally:
            stop(running)
        assert (key in called.stdout) is reached, (called.stdout, called.stderr)
        if not reached:
            assert called.returncode == 2 and "no tool named 'middle.inner.p.read'" in called.stderr, called.stderr


def test_a_keeper_or_gateway_started_by_a_gateways_llmc_child_keeps_the_rule(tmp_path: Path) -> None:
    """What such a child sees (LLMC_REQUIRE_SANDBOX from its parent): `session start` and
    `serve` refuse the unsandboxed third-party server, naming it; explicit sandbox = "none"
    passes. Only llmc's own children are told (a third-party server is not)."""
    from llmc_cli import services
    from llmc_cli.config.profiles import load_profile

    inner = write(tmp_path / "inner.toml", "[servers.p]\n" + PROBER)
    told = {"LLMC_REQUIRE_SANDBOX": "1"}
    started = llmc("-p", str(inner), "session", "start", "held", env=told)
    assert started.returncode == 3 and "server p: a gateway with principals" in started.stderr, started.stderr
    served = llmc("serve", "-p", str(inner), "--http", f"127.0.0.1:{free_port()}", env=told, timeout=60)
    assert served.returncode == 3 and "server p:" in served.stderr, served.stderr
    accepted = write(tmp_path / "none.toml", "[servers.p]\n" + PROBER + 'sandbox = "none"\n')
    called = llmc("-p", str(accepted), "call", "p.env", env=told)
    assert called.returncode == 0, called.stderr
    assert "LLMC_REQUIRE_SANDBOX" not in json.loads(called.json()["structuredContent"]["result"])

    outer = write(tmp_path / "outer.toml", "[servers.p]\n" + PROBER + 'sandbox = "none"\n' + nested("inner", inner) + PRINCIPALS)
    specs, _ = services.launch_specs(load_profile(str(outer)), require_sandbox=True)
    env = {spec.name: spec.env for spec in specs}
    assert env["inner"]["LLMC_REQUIRE_SANDBOX"] == "1" and "LLMC_REQUIRE_SANDBOX" not in env["p"]
    specs, _ = services.launch_specs(load_profile(str(outer)))
    assert "LLMC_REQUIRE_SANDBOX" not in {k for spec in specs for k in spec.env}


def fakes(tmp_path: Path) -> dict[str, str]:
    """Server tables that claim to be llmc: each runs the prober instead."""
    code = (
        f"import runpy, sys; sys.argv = sys.argv[:1]; runpy.run_path({str(PEERS / 'sandbox_prober.py')!r}, run_name='__main__')"
    )
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(code + "; sys.exit(0)\n")
    shadow = tmp_path / "cwd"
    (shadow / "llmc_cli").mkdir(parents=True)
    (shadow / "llmc_cli" / "__init__.py").write_text("")
    (shadow / "llmc_cli" / "__main__.py").write_text(code + "\n")
    exe = json.dumps(sys.executable)
    return {
        "-c before -m": f"command = {exe}\nargs = {json.dumps(['-P', '-c', code, '-m', 'llmc_cli', 'serve'])}\n",
        "PYTHONPATH": f'command = {json.dumps(llmc_executable())}\nargs = ["serve"]\nenv = {{ PYTHONPATH = {json.dumps(str(site))} }}\n',
        "the cwd first on sys.path": f'command = {exe}\nargs = ["-m", "llmc_cli", "serve"]\ncwd = {json.dumps(str(shadow))}\n',
    }


@pytest.mark.parametrize("how", ["-c before -m", "PYTHONPATH", "the cwd first on sys.path"])
def test_what_is_llmc_itself_cannot_be_faked(tmp_path: Path, how: str) -> None:
    """Each fake is a third-party server: it gets no LLMC_PROTECTED_PATHS, LLMC_STATE_DIR or
    LLMC_CONFIG_DIR, and a gateway with principals refuses it unsandboxed."""
    profile = write(tmp_path / "fake.toml", "[servers.p]\n" + fakes(tmp_path)[how])
    called = llmc("-p", str(profile), "call", "p.env")
    assert called.returncode == 0, called.stderr
    env = json.loads(called.json()["structuredContent"]["result"])
    assert not {"LLMC_PROTECTED_PATHS", "LLMC_STATE_DIR", "LLMC_CONFIG_DIR"} & set(env), env
    gateway = write(tmp_path / "gw.toml", profile.read_text() + PRINCIPALS)
    refused = llmc("serve", "-p", str(gateway), "--http", f"127.0.0.1:{free_port()}", env={"GW_T": TOKEN}, timeout=60)
    assert refused.returncode == 3 and "server p: a gateway with principals" in refused.stderr, refused.stderr


def test_llmc_itself_is_judged_on_an_allow_list(tmp_path: Path) -> None:
    from llmc_cli.config.paths import is_llmc_command

    py = sys.executable
    assert is_llmc_command([llmc_executable(), "serve", "-p", "ops"])
    assert is_llmc_command([py, "-P", "-m", "llmc_cli", "serve"]) and is_llmc_command([py, "-I", "-X", "dev", "-mllmc_cli"])
    assert is_llmc_command([llmc_executable(), "serve"], {"PYTHONUNBUFFERED": "1"})
    for argv in (
        [py, "-m", "llmc_cli"],  # the current directory first on sys.path
        [py, "-P", "-c", "0", "-m", "llmc_cli"],
        [py, "-Pc", "0", "-m", "llmc_cli"],
        [py, "-P", "-m", "llmc_cli_other"],
        [py, "-P", "-W", "ignore::evil.Warning", "-m", "llmc_cli"],
        [py, "-P", "-X", "pycache_prefix=/tmp/x", "-m", "llmc_cli"],
        [py, "-P", "script.py", "-m", "llmc_cli"],
    ):
        assert not is_llmc_command(argv), argv
    for env in (
        {"PYTHONPATH": "/tmp"},
        {"PYTHONHOME": "/tmp"},
        {"PYTHONWARNINGS": "x"},
        {"LD_PRELOAD": "/tmp/x.so"},
        {"PATH": str(tmp_path)},
    ):
        assert not is_llmc_command([llmc_executable(), "serve"] if "PATH" not in env else ["llmc", "serve"], env), env
