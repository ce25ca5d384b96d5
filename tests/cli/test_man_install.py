"""The man pages come with the install: the wheel puts them in PREFIX/share/man/man1, where `man`
finds them from PREFIX/bin on PATH (a venv's, a --prefix, a --user install)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# setuptools builds in the source tree's build/ and egg-info/: the wheel is built from a copy of the
# tree in a temporary directory, so no other build (another worker, a developer's `pip install .`)
# can take its files away ("Directory not empty: build/bdist...", "No such file ... WHEEL").
LEFT_OUT = shutil.ignore_patterns(
    ".git", ".venv", "build", "*.egg-info", "node_modules", "__pycache__", "tests", "bench", ".cache"
)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's wheel, built offline from this tree (no build isolation, no dependencies)."""
    out = tmp_path_factory.mktemp("wheel")
    source = tmp_path_factory.mktemp("source") / "llmc"
    shutil.copytree(ROOT, source, ignore=LEFT_OUT, symlinks=True)
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(source),
            "--no-build-isolation",
            "--no-deps",
            "--no-index",
            "-q",
            "-w",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr
    (found,) = out.glob("llmc_cli-*.whl")
    return found


def test_the_wheel_holds_every_man_page_in_share_man_man1(wheel: Path) -> None:
    pages = sorted(p.name for p in (ROOT / "man").glob("*.1"))
    assert "llmc.1" in pages and "llmc-tools-list.1" in pages
    with zipfile.ZipFile(wheel) as archive:
        shipped = {
            name.rpartition("/")[2]: archive.read(name)
            for name in archive.namelist()
            if name.split("/", 1)[-1].startswith("data/share/man/man1/")
        }
    assert sorted(shipped) == pages
    assert shipped["llmc.1"] == (ROOT / "man" / "llmc.1").read_bytes()


@pytest.mark.skipif(shutil.which("man") is None, reason="no man here")
def test_man_finds_the_page_from_the_installed_bin_on_path(wheel: Path, tmp_path: Path) -> None:
    prefix = tmp_path / "prefix"
    # --ignore-installed: without it pip would first uninstall the llmc of the running environment
    install = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-index",
            "-q",
            "--ignore-installed",
            "--prefix",
            str(prefix),
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert install.returncode == 0, install.stderr
    env = {k: v for k, v in os.environ.items() if k not in ("MANPATH", "MANOPT")}
    found = subprocess.run(
        ["man", "-w", "llmc"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**env, "PATH": f"{prefix / 'bin'}{os.pathsep}/usr/bin:/bin"},
    )
    assert found.returncode == 0 and found.stdout.strip() == str(prefix / "share" / "man" / "man1" / "llmc.1")
    assert Path(sys.executable).with_name("llmc").exists()  # the environment running the tests kept its llmc
