"""A real PostgreSQL for the tests: Debian's postgresql package (scripts/test.sh installs it when
run as root), a fresh cluster in a temp dir run as an unprivileged user (PostgreSQL refuses
root; as root the tests run it as `nobody`), listening on a free loopback port only, password
authentication over TCP."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.helpers import free_port

PASSWORD = "pg-secret-Xq7w"  # for the message tests: it must never be printed
USER = "llmc"


def bin_dir() -> Path | None:
    """Debian keeps initdb/pg_ctl under /usr/lib/postgresql/VERSION/bin, off PATH."""
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(candidates[-1]).parent if candidates else None


class PostgresServer:
    """One cluster: start, stop (to test a database that went away), start again."""

    def __init__(self) -> None:
        binaries = bin_dir()
        if binaries is None:
            pytest.skip("PostgreSQL is not installed (scripts/test.sh installs it with apt-get when run as root)")
        self.bin = binaries
        self.root = Path(tempfile.mkdtemp(prefix="llmc-pg-"))
        os.chmod(self.root, 0o755)  # `nobody` must reach its data directory
        self.data = self.root / "data"
        self.port = free_port()
        self.as_user: list[str] = ["runuser", "-u", "nobody", "--"] if os.geteuid() == 0 else []
        pwfile = self.root / "pw"
        pwfile.write_text(PASSWORD + "\n")
        self.data.mkdir()
        if self.as_user:
            shutil.chown(self.data, "nobody")
            shutil.chown(pwfile, "nobody")
            shutil.chown(self.root, "nobody")
        self._run(
            "initdb", "-D", str(self.data), "-U", USER, f"--pwfile={pwfile}", "--auth=scram-sha-256", "--no-sync", "-E", "UTF8"
        )
        pwfile.unlink()
        self.start()

    def _run(self, tool: str, *args: str) -> None:
        proc = subprocess.run(
            [*self.as_user, str(self.bin / tool), *args], capture_output=True, text=True, timeout=120, cwd=self.root
        )
        assert proc.returncode == 0, f"{tool}: {proc.stdout}{proc.stderr}"

    def start(self) -> None:
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-l",
            str(self.root / "log"),
            "-w",
            "-t",
            "60",
            "-o",
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200",
            "start",
        )

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def url(self, dbname: str = "postgres", *, password: bool = False) -> str:
        secret = f":{PASSWORD}" if password else ""
        return f"postgresql://{USER}{secret}@127.0.0.1:{self.port}/{dbname}"

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.url(password=True), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')  # type: ignore[arg-type]  # a test's own name
        return self.url(name)

    def close(self) -> None:
        try:
            self.stop()
        except AssertionError:
            pass  # already stopped by the test
        shutil.rmtree(self.root, ignore_errors=True)
