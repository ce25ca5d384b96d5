"""A secret expanded into a server's URL (query, userinfo) or command line never lands in a file
under the state directory: caches are keyed by digests, and remembered URLs are stored without
userinfo and query. Real servers (the SDK test peer over stdio, Streamable HTTP in both eras,
HTTP+SSE), the real CLI."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from tests.faults.test_files import SDK
from tests.helpers import llmc
from tests.profiles.runner import toml_str

SECRET = "s3cr3t-7f1d2e9c-never-stored"
ENV = {"SVC_API_KEY": SECRET}

# (variant, fixture giving a URL or None for stdio, the server table with ${SVC_API_KEY} in it)
VARIANTS = [
    ("modern-http query", "sdk_stateful", lambda url: f"url = {toml_str(url + '?api_key=${SVC_API_KEY}')}"),
    (
        "legacy-http query (remembered session)",
        "sdk_legacy",
        lambda url: f"url = {toml_str(url + '?api_key=${SVC_API_KEY}&x=1')}",
    ),
    (
        "legacy-http userinfo",
        "sdk_legacy",
        lambda url: f"url = {toml_str(url.replace('http://', 'http://user:${SVC_API_KEY}@'))}",
    ),
    ("http+sse query", "sdk_sse", lambda url: f"url = {toml_str(url + '?token=${SVC_API_KEY}')}"),
    (
        "stdio argument",
        None,
        lambda url: f'command = "sh"\nargs = ["-c", {toml_str("exec " + shlex.join(SDK) + " # ${SVC_API_KEY}")}]',
    ),
]


@pytest.mark.parametrize("variant, fixture, table", VARIANTS, ids=[v[0] for v in VARIANTS])
def test_no_secret_from_a_server_address_is_stored(variant, fixture, table, request, isolated_dirs: Path) -> None:
    url = request.getfixturevalue(fixture) if fixture else ""
    profile = isolated_dirs / "secret.toml"
    profile.write_text(f"[servers.svc]\n{table(url)}\n")
    for argv in (["tools", "list"], ["call", "svc.add", "a=2", "b=3"], ["call", "svc.add", "a=1", "b=1"]):
        proc = llmc("-p", str(profile), *argv, env=ENV, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert SECRET not in proc.stdout + proc.stderr
    forgot = llmc("-p", str(profile), "session", "forget", env=ENV, timeout=60)
    assert forgot.returncode == 0, forgot.stderr
    assert SECRET not in forgot.stdout + forgot.stderr
    state = isolated_dirs / "state"
    assert (state / "servers.json").exists()
    holding = [str(p) for p in state.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert holding == []
