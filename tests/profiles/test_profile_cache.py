"""The validated-profile cache: a profile text that validated once loads again without pydantic
(start-up time), and the cache never changes what a profile means."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from llmc_cli.config import profile_cache, profiles, schema, validation
from llmc_cli.errors import ConfigError

# Every nested dataclass of the schema appears, so schema.from_json is checked for each.
RICH = """description = "cached"
audit_results = true
[servers.local]
command = "python3"
args = ["server.py", "--flag"]
env = { TOKEN = "${TOKEN}" }
timeout = 5
[servers.remote]
url = "https://example.com/mcp"
headers = { Authorization = "Bearer ${KEY}" }
transport = "http"
oauth = { client_id = "c", scopes = ["read"], grant = "client_credentials" }
[servers.ws]
builtin = "workspace"
options = { roots = ["."], read_only = true, depth = 3 }
enabled = false
[policy]
default = "deny"
allow = ["local.*"]
hints = { "local.x" = { readOnly = true, destructive = false } }
args = { "local.*" = { path = ["/tmp/*"] } }
calls_per_minute = 5
tool_calls_per_minute = { "local.x" = 2 }
[llm]
provider = "anthropic"
temperature = 1
max_steps = 3
"""

LOAD = """import dataclasses, json, sys
from llmc_cli.config.profiles import load_profile
loaded = load_profile(sys.argv[1])
print(json.dumps({"pydantic": "pydantic" in sys.modules, "profile": dataclasses.asdict(loaded.profile)}, default=str))
"""


@pytest.fixture
def profile(isolated_dirs: Path) -> Path:
    path = isolated_dirs / "config" / "profiles" / "cached.toml"
    path.parent.mkdir(parents=True)
    path.write_text(RICH)
    return path


def cache_dir(isolated_dirs: Path) -> Path:
    return isolated_dirs / "state" / "profile-cache"


def load(path: Path) -> dict:
    """load_profile in a fresh interpreter: did it import pydantic, and what did it load?"""
    run = subprocess.run([sys.executable, "-c", LOAD, str(path)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def test_the_second_load_needs_no_pydantic_and_loads_the_same(isolated_dirs: Path, profile: Path):
    first, second = load(profile), load(profile)
    assert first["pydantic"] and not second["pydantic"]
    assert second["profile"] == first["profile"]
    assert first["profile"]["servers"]["remote"]["oauth"]["grant"] == "client_credentials"
    assert first["profile"]["llm"]["temperature"] == 1.0  # as validated (float), not as written
    [entry] = cache_dir(isolated_dirs).iterdir()
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600
    assert stat.S_IMODE(entry.parent.stat().st_mode) == 0o700
    # In-process too: the cached object equals the validated one, type for type.
    validated = validation.validate(tomllib.loads(RICH), "x")
    assert profiles.load_profile(str(profile)).profile == validated


def test_an_edited_profile_is_validated_again(isolated_dirs: Path, profile: Path):
    load(profile)
    profile.write_text(RICH.replace('"cached"', '"edited"'))
    again = load(profile)
    assert again["pydantic"] and again["profile"]["description"] == "edited"
    assert not load(profile)["pydantic"]


def test_a_changed_schema_misses(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    before = profile_cache.key_of(RICH)
    changed = tmp_path / "schema.py"
    changed.write_bytes(Path(schema.__file__).read_bytes() + b"\n# changed\n")
    monkeypatch.setattr(schema, "__file__", str(changed))
    assert profile_cache.key_of(RICH) != before


def test_a_schema_edited_in_place_misses(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """The key names the schema by its file's identity, not its bytes: an edit of the same file
    that keeps its size (and inode) still changes its modification time, and misses."""
    source = Path(schema.__file__).read_bytes()
    copy = tmp_path / "schema.py"
    copy.write_bytes(source)
    monkeypatch.setattr(schema, "__file__", str(copy))
    before = profile_cache.key_of(RICH)
    assert profile_cache.key_of(RICH) == before  # the same file: the same key
    stat = copy.stat()
    with copy.open("r+b") as fh:  # one byte changed, the size and inode kept
        fh.write(b"#")
    os.utime(copy, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert copy.stat().st_size == stat.st_size and copy.stat().st_ino == stat.st_ino
    assert profile_cache.key_of(RICH) != before
    assert profile_cache.key_of(RICH.replace("cached", "other")) != profile_cache.key_of(RICH)  # the text counts


@pytest.mark.parametrize(
    "garbage",
    [
        b"",
        b"{not json",
        b'{"key": "other", "profile": {}}',
        b'{"key": "KEY"}',
        b'{"key": "KEY", "profile": {"servers": {"a": {}}}}',
    ],
)
def test_a_corrupt_cache_entry_is_ignored_and_replaced(isolated_dirs: Path, profile: Path, garbage: bytes):
    first = load(profile)
    [entry] = cache_dir(isolated_dirs).iterdir()
    entry.write_bytes(garbage.replace(b"KEY", entry.stem.encode()))
    again = load(profile)
    assert again["pydantic"] and again["profile"] == first["profile"]
    assert json.loads(entry.read_text())["key"] == entry.stem  # written afresh
    assert not load(profile)["pydantic"]


def test_validation_errors_are_never_cached(isolated_dirs: Path, profile: Path):
    profile.write_text(RICH.replace("timeout = 5", "timeout = 0"))
    for _ in range(2):
        with pytest.raises(ConfigError, match=r"cached.toml:7: servers.local.timeout: Input should be greater than 0"):
            profiles.load_profile(str(profile))
    assert not cache_dir(isolated_dirs).exists()


def test_a_profile_json_cannot_carry_is_not_cached(isolated_dirs: Path, profile: Path):
    # A TOML date in a server's options would come back from JSON as a string.
    profile.write_text(RICH.replace("depth = 3", "since = 2026-01-01"))
    loaded = profiles.load_profile(str(profile))
    assert str(loaded.profile.servers["ws"].options["since"]) == "2026-01-01"
    assert not cache_dir(isolated_dirs).exists()
    assert load(profile)["pydantic"]


def test_the_cache_stays_bounded(isolated_dirs: Path):
    for n in range(profile_cache.ENTRIES + 5):
        profile_cache.parse_profile(f'description = "{n}"\n', "x")
    assert len(list(cache_dir(isolated_dirs).iterdir())) == profile_cache.ENTRIES


def test_an_unwritable_state_dir_only_costs_speed(isolated_dirs: Path, profile: Path, monkeypatch: pytest.MonkeyPatch):
    (isolated_dirs / "state").write_text("a file where the state directory should be")
    assert profiles.load_profile(str(profile)).profile.description == "cached"
