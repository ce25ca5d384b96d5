"""Issue 35: `[policy.resources]` globs are escaped with `../`, `%2e%2e`, `//../` inside the URI.
A resource is judged by its normalised URI (RFC 3986: unreserved escapes decoded, dot segments
removed, "//" read as "/"); what cannot be normalised (an encoded dot segment or slash, an invalid
escape) is denied. The same for `policy check --resource`, `resources read` and the gateway, in
front of the `mcp` SDK library server (tests/peers/sdk_library.py), whose lib://public/{name}
template would answer anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import llmc
from tests.policy.test_reads import library_profile

POLICY = '[policy.resources]\nallow = ["lib.lib://public/*"]\n'
ESCAPES = [
    "lib://public/../private/salaries",
    "lib://public/%2e%2e/private/salaries",
    "lib://public/%2E./private/salaries",
    "lib://public//../private/salaries",
    "lib://public/./x/../../private/salaries",
    "lib://public/..%2fprivate/salaries",
    "lib://public/..%5cprivate%5csalaries",
    "lib://public/%zz",
]


@pytest.mark.parametrize("uri", ESCAPES)
def test_resource_globs_are_not_escaped_by_dot_segments_or_encodings(isolated_dirs: Path, uri: str) -> None:
    library_profile(isolated_dirs, POLICY)
    checked = llmc("policy", "check", "--resource", f"lib:{uri}")
    assert checked.returncode == 4 and checked.json()["decision"] == "deny", checked.stdout
    read = llmc("resources", "read", f"lib:{uri}")
    assert read.returncode == 4 and read.stderr.startswith("llmc: denied: ") and len(read.stderr.splitlines()) == 1, read.stderr


def test_a_normalised_uri_inside_the_glob_is_still_allowed(isolated_dirs: Path) -> None:
    library_profile(isolated_dirs, POLICY)
    for uri in ("lib://public/readme", "lib://public/x/../readme", "lib://public/r%65adme", "LIB://public/readme"):
        checked = llmc("policy", "check", "--resource", f"lib:{uri}")
        assert checked.returncode == 0 and checked.json()["decision"] == "allow", (uri, checked.stdout)


@pytest.mark.e2e  # the gateway as a process, with an SDK host
def test_the_gateway_judges_the_normalised_uri(isolated_dirs: Path, tmp_path: Path) -> None:
    from mcp.shared.exceptions import MCPError

    from tests.gateway.test_reads import servers
    from tests.gateway.test_stdio import host, run

    profile = tmp_path / "gw.toml"
    profile.write_text(servers() + "\n" + POLICY)

    async def work() -> None:
        async with host(profile, "legacy") as client:
            assert (await client.read_resource("lib.lib://public/readme")).contents[0].text == "public readme"
            for uri in ESCAPES:
                with pytest.raises(MCPError, match="Resource not found"):
                    await client.read_resource(f"lib.{uri}")

    run(work)
