"""Named sessions: start, find, inspect and stop session keepers (the process is keeper/daemon.py).

A keeper listens on `$STATE/sessions/NAME.sock` (directory 0700, socket 0600) and logs to
`NAME.log` beside it. A socket file nobody answers on is stale (the keeper was killed, or the
machine rebooted): it is removed where it is found, and the session counts as not running.
"""

from __future__ import annotations

import json
import os
import select
import socket
import sys
import time
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from llmc_cli.config import paths
from llmc_cli.config.files import open_own
from llmc_cli.errors import ConfigError, ConnectionFailed, TimeoutExpired, UsageError, from_json
from llmc_cli.keeper.roster import socket_path as socket_path  # re-exported: session, daemon
from llmc_cli.keeper.roster import specs_of as specs_of
from llmc_cli.keeper.transport import exchange
from llmc_cli.model import JSONObject, OAuthSpec, SandboxSpec, ServerSpec

if TYPE_CHECKING:
    from signal import SIGKILL

    from llmc_cli.keeper.transport import KeeperStatus
else:
    from _signal import SIGKILL  # `signal` less its enums, which cost every keeper call (interrupts.py)

START_GRACE = 15.0  # on top of the slowest server's timeout, for the keeper's own start-up
STOP_WAIT = 10.0


def log_path(name: str) -> Path:
    return socket_path(name).with_suffix(".log")


def status(name: str, timeout: float = 5.0) -> KeeperStatus:
    """What the keeper reports about itself. A stale socket is removed and reported as not running."""

    path = socket_path(name)
    try:
        return cast("KeeperStatus", exchange(str(path), {"llmc": "status"}, name, timeout))  # our own keeper's reply
    except ConnectionFailed:
        _remove_stale(path)
        raise


def _remove_stale(path: Path) -> None:
    """Remove a socket file nobody listens on; one whose keeper is alive (it closed a connection
    while stopping, say) is left to it."""

    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(str(path))
        return  # someone answers: not stale
    except (FileNotFoundError, TimeoutError):
        return  # gone already, or a keeper too busy to accept
    except OSError:
        pass  # refused: nobody listens
    finally:
        probe.close()
    try:
        path.unlink()
    except FileNotFoundError:
        pass


def names() -> list[str]:
    return sorted(p.stem for p in paths.keepers_dir().glob("*.sock"))


def held_specs(name: str, only: tuple[str, ...] = ()) -> tuple[str, list[ServerSpec]]:
    """(socket path, the servers the keeper holds) for a command run with `--session NAME`."""
    held = status(name)
    return str(socket_path(name)), specs_of(name, list(held.get("servers", [])), only)


# -- start and stop -------------------------------------------------------------------------------


def start(
    name: str, specs: list[ServerSpec], *, idle: float, profile: str | None, reach: Mapping[str, str] | None = None
) -> KeeperStatus:
    """Launch a keeper in the background and wait until its servers are up (or failed).

    The server definitions reach it on a pipe: they may carry expanded secrets (headers), which
    must not be written to disk or appear in a process listing. `reach`: how each server is
    reached (ServerSpec.reach, by name): the keeper serves a server only to commands that would
    reach it the same way."""
    path = socket_path(name)
    if path.exists():
        try:
            running = status(name)
        except ConnectionFailed:
            pass  # stale, and removed
        else:
            raise UsageError(
                f"session {name} is already running (pid {running.get('pid')}); "
                f"stop it with `llmc session stop {name}` or pick another name"
            )
    try:
        fd = open_own(log_path(name), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    except OSError as exc:
        raise ConfigError(f"cannot write {log_path(name)}: {exc.strerror or exc}") from None
    import subprocess  # only here: a call through a keeper does not pay for it

    with os.fdopen(fd, "ab") as log:
        # -P: `-m` would put the current directory first on sys.path, so a json.py or socket.py
        # in whatever directory `session start` runs in would be imported by the keeper.
        proc = subprocess.Popen(
            [sys.executable, "-P", "-m", "llmc_cli.keeper.daemon"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            close_fds=True,
            start_new_session=True,
        )  # no terminal, own process group
    assert proc.stdin is not None and proc.stdout is not None
    config = {
        "name": name,
        "idle": idle,
        "profile": profile,
        "specs": [spec_to_json(s) for s in specs],
        "reach": dict(reach or {}),
    }
    try:
        proc.stdin.write(json.dumps(config).encode("utf-8"))
        proc.stdin.close()
    except BrokenPipeError:
        pass  # it died at once: reported below with its log
    deadline = time.monotonic() + max((s.timeout for s in specs), default=60.0) + START_GRACE
    line = b""
    waiting = select.poll()  # poll(2): select(2) cannot watch a descriptor numbered past 1024
    waiting.register(proc.stdout.fileno(), select.POLLIN)
    while time.monotonic() < deadline and not line.endswith(b"\n"):
        if waiting.poll(min(0.5, max(0.0, deadline - time.monotonic())) * 1000):
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                break
            line += chunk
        elif proc.poll() is not None:
            break
    proc.stdout.close()
    if not line.endswith(b"\n"):
        if proc.poll() is None:
            _kill_group(proc.pid)
            raise TimeoutExpired(f"session {name}: its servers did not start in time (log: {log_path(name)})")
        raise ConnectionFailed(f"session {name}: the keeper exited during start-up: {_log_tail(name)}")
    reply = json.loads(line)
    if reply.get("llmc") == "error":
        raise from_json(reply)
    return cast("KeeperStatus", reply)  # the keeper's own status line (daemon.Keeper.status)


def stop(name: str) -> JSONObject:
    """Ask the keeper to stop and wait until it has (its servers stopped with it)."""

    path = socket_path(name)
    try:
        reply = exchange(str(path), {"llmc": "stop"}, name)
    except ConnectionFailed:
        _remove_stale(path)
        raise
    stated = reply.get("pid") or 0
    pid = int(stated) if isinstance(stated, (int, float, str)) else 0
    deadline = time.monotonic() + STOP_WAIT
    while pid and _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    forced = bool(pid) and _alive(pid)
    if forced:
        _kill_group(pid)
    _remove_stale(path)
    return {"name": name, "pid": pid, "stopped": True, **({"forced": True} if forced else {})}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """An exited keeper its parent has not reaped yet: the keeper outlives `session start`, so its
    parent is init, and a container's pid 1 often reaps nothing. Linux only; elsewhere False."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except (OSError, IndexError):
        return False


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, SIGKILL)  # the keeper leads its own process group
    except (ProcessLookupError, PermissionError):
        pass


def _log_tail(name: str, lines: int = 5) -> str:
    try:
        text = log_path(name).read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    return " | ".join(text[-lines:]) or "(empty log)"


# -- server definitions on the pipe ---------------------------------------------------------------


def spec_to_json(spec: ServerSpec) -> JSONObject:
    data = {f: getattr(spec, f) for f in spec.__dataclass_fields__}
    data.update(
        command=list(spec.command),
        env=dict(spec.env),
        headers=dict(spec.headers),
        options=dict(spec.options),
        oauth=asdict(spec.oauth) if spec.oauth else None,
        sandbox=asdict(spec.sandbox) if spec.sandbox else None,
        launch=list(spec.launch),
    )
    return data


def spec_from_json(data: dict[str, Any]) -> ServerSpec:
    oauth, sandbox = data.get("oauth"), data.get("sandbox")
    return ServerSpec(
        **{
            **data,
            "command": tuple(data.get("command") or ()),
            "launch": tuple(data.get("launch") or ()),
            "oauth": OAuthSpec(**{**oauth, "scopes": tuple(oauth.get("scopes") or ())}) if oauth else None,
            "sandbox": SandboxSpec(
                **{
                    **sandbox,
                    "read_paths": tuple(sandbox.get("read_paths") or ()),
                    "write_paths": tuple(sandbox.get("write_paths") or ()),
                }
            )
            if sandbox
            else None,
        }
    )
