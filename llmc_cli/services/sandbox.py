"""How a third-party stdio server runs: the one place that turns a profile's `sandbox`,
`network`, `read_paths` and `write_paths` into the launch argv (resource limits, then
bubblewrap) that the stdio transport puts before the server's command. Every path that spawns
a stdio server (a command's catalog, a session keeper, the gateway) gets its specs from
services.launch_specs, which calls `contain`.

Inside bubblewrap a server sees: the system read-only (SYSTEM_DIRS, minus password hashes and
host keys), its own command and install tree read-only, its declared paths, a private /tmp, and
a private writable HOME kept under llmc's state directory (so npx/uvx caches survive); never
llmc's config and state directories, the profile, the audit trail, the approval key or OAuth
tokens (covered even inside a declared path); no network unless `network = true`; its own PID
and user namespaces, no capabilities, and resource limits.

A command's stdio servers start first (launch): a stdio server's own start-up (node: about a
third of a second) is most of a short command's time, so a command's first act is to decide its
servers' launch (launch_specs: which servers the profile lets it start, their environment, their
sandbox; decided once, there) and to start the processes of the stdio servers it will use first,
before the rest of llmc loads (the pipeline, policy, audit, state), whose start-up then overlaps
the servers'. The catalog made from that (services.open_catalog) adopts the processes, and
Launched.close stops any still running when the command ends, however it ends (one it never
adopted, because the command failed first), as a connection's close stops a server.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Collection
from dataclasses import replace
from typing import TYPE_CHECKING

from llmc_cli import config, lazy_pattern
from llmc_cli import server as llmc_server  # its lazy interface: bubblewrap's and the jail's names load with a sandboxed launch
from llmc_cli.config.paths import (
    PROTECTED_PATHS_VAR,
    REQUIRE_SANDBOX_VAR,
    audit_log_path,
    config_dir,
    ensure_private_dir,
    is_llmc_command,
    own_directories,
    sandbox_required_by_parent,
    state_dir,
    which,
)
from llmc_cli.errors import ConfigError, LlmcError
from llmc_cli.mcp import transports  # its lazy names: the stdio transport loads with a stdio server
from llmc_cli.model import SandboxSpec, ServerSpec, sha256

if TYPE_CHECKING:
    from llmc_cli.config.profiles import LoadedProfile
    from llmc_cli.mcp.transports.stdio import StdioTransport

# Resource limits of a sandboxed server: processes and threads (RLIMIT_NPROC: the kernel counts
# them per user and does not enforce it for root; PIDS: for root, a pids cgroup of the server's
# own, where one can be made), open files, and memory (RLIMIT_DATA: what it
# can write to, not RLIMIT_AS, since JavaScript and WebAssembly engines reserve address space by
# the tens of GiB without using it). No CPU-time limit: a server lives as long as its client.
LIMITS = {"RLIMIT_NPROC": 4096, "PIDS": 1024, "RLIMIT_NOFILE": 4096, "RLIMIT_DATA": 4 << 30}
# compiled when a sandboxed server is started or confined (0.15 ms a process otherwise)
INTERPRETERS = lazy_pattern(r"^(node|nodejs|bun|deno|python[0-9.]*|pypy[0-9.]*)$")
_warned: set[str] = set()  # servers said to run unsandboxed already: one line per command


def _bwrap() -> str | None:
    """bubblewrap as the user's PATH finds it (the system's directories when PATH is unset)."""

    return llmc_server.find_bwrap(os.environ.get("PATH") or llmc_server.FIXED_PATH)


def warn_unsandboxed(specs: list[ServerSpec]) -> None:
    """One line on stderr for the servers that asked for sandbox = "auto" and run without one."""
    names = [
        s.name
        for s in specs
        if s.kind == "stdio" and s.sandbox is not None and s.sandbox.mode == "auto" and not s.launch and s.name not in _warned
    ]
    if names:
        _warned.update(names)
        print(
            f"llmc: bubblewrap is not usable here: server(s) {', '.join(names)} run WITHOUT a sandbox "
            '(sandbox = "auto"; install bubblewrap, or say sandbox = "none")',
            file=sys.stderr,
            flush=True,
        )


def describe(sandbox: SandboxSpec | None, launched: bool | None = None) -> str:
    """How a server with this confinement runs here, for people (`servers show`, `tools list -v`).
    `launched`: whether its launch was built (None: ask whether bubblewrap works here)."""

    if sandbox is None or sandbox.mode == "none":
        return "not sandboxed"
    if not (llmc_server.bwrap_usable(_bwrap()) if launched is None else launched):
        return (
            'not sandboxed (sandbox = "auto", bubblewrap is not usable here)'
            if sandbox.mode == "auto"
            else 'refused (sandbox = "bwrap", bubblewrap is not usable here)'
        )
    network = "network" if sandbox.network else "no network"
    paths = [
        f"read: {', '.join(sandbox.read_paths)}" if sandbox.read_paths else "",
        f"write: {', '.join(sandbox.write_paths)}" if sandbox.write_paths else "",
    ]
    return f"in bwrap ({'; '.join(p for p in [network, *paths] if p)})"


def contain(spec: ServerSpec, profile: LoadedProfile | None, *, required: bool = False) -> ServerSpec:
    """`spec` with its launch argv set when the profile sandboxes it. sandbox = "auto" without a
    usable bubblewrap: one line on stderr and the server runs as it is (ConfigError when
    `required`: a gateway with principals). ConfigError when it cannot be contained as said.
    Unsandboxed "auto" servers are told about by warn_unsandboxed, once for all of them."""

    if spec.kind != "stdio":
        return spec
    sandbox = spec.sandbox
    if sandbox is None or sandbox.mode == "none":
        if required and (sandbox is None) and not is_llmc_command(spec.command, spec.env):
            raise ConfigError(
                f"server {spec.name}: a gateway with principals does not start a stdio server without a "
                'sandbox: set sandbox = "auto" or "bwrap" for it (or sandbox = "none" to accept '
                "the risk)"
            )
        return spec
    own_files_out_of_reach(spec.name, sandbox, profile)
    bwrap = _bwrap()
    if not llmc_server.bwrap_usable(bwrap):
        if sandbox.mode == "bwrap" or required:
            raise ConfigError(
                f'server {spec.name}: sandbox = "{sandbox.mode}" but bubblewrap (bwrap) is not usable '
                "here (Debian: apt-get install bubblewrap; a container may forbid its namespaces)"
            )
        return spec  # warn_unsandboxed says so
    assert bwrap is not None
    return replace(spec, launch=tuple(_launch(spec, sandbox, bwrap, profile)))


def protected_paths(profile: LoadedProfile | None) -> list[str]:
    """llmc's own files, which no tool of its workspace server may touch: the config and state
    directories, the profile file, its audit log and its manifest lock, wherever they are."""

    paths = [f"{config_dir()}/", f"{state_dir()}/"]  # "/": a directory, protected as one before it exists
    if profile is not None:
        if profile.path is not None:
            paths.append(str(profile.path))
        paths.append(str(audit_log_path(profile.profile.audit_log)))
        if profile.profile.lock:
            paths.append(config.lock_path(profile))
    else:
        paths.append(str(audit_log_path()))
    inherited = os.environ.get(PROTECTED_PATHS_VAR)  # this llmc is itself a server of another llmc
    if inherited:
        try:
            paths += [p for p in json.loads(inherited) if isinstance(p, str) and p]
        except (ValueError, TypeError):
            pass  # the workspace server refuses a malformed list; here it only adds
    return list(dict.fromkeys(os.path.abspath(os.path.expanduser(p)) + ("/" if p.endswith("/") else "") for p in paths))


def own_files_out_of_reach(server: str, sandbox: SandboxSpec, profile: LoadedProfile | None) -> None:
    """ConfigError (one line naming the server and the path) unless every file llmc writes is out
    of this server's reach. Covered inside a declared path (bwrap_argv) are llmc's directories (an
    empty read-only tmpfs, made before the server starts) and files that exist (/dev/null); not
    covered, so refused: a declared path inside llmc's own directories or files; the audit log or
    the tool lock outside those directories inside a write path (a name llmc makes later, a
    rotation, a .lock beside it, could be a link the server put there first), or the audit log
    inside a read path (its later records); and a symbolic link on the way to any of them inside
    a write path (the server could point it elsewhere)."""
    dirs = {"config directory": str(config_dir()), "state directory": str(state_dir())}
    loose = {"audit log": str(audit_log_path(profile.profile.audit_log if profile else None))}
    if profile is not None and profile.profile.lock:
        loose["tool lock"] = config.lock_path(profile)
    named = {**dirs, **loose, **({"profile": str(profile.path)} if profile is not None and profile.path else {})}
    declared = [(p, "read_paths") for p in sandbox.read_paths] + [(p, "write_paths") for p in sandbox.write_paths]
    real_dirs = [os.path.realpath(d) for d in dirs.values()]
    for path, key in declared:
        for what, own in named.items():
            real = os.path.realpath(own)
            if path != real and llmc_server.is_under(path, [real]):  # the directory itself is covered whole
                raise ConfigError(f"server {server}: {key} {path} is inside llmc's own {what} {own}: declare a path outside it")
    for what, own in loose.items():
        real = os.path.join(os.path.realpath(os.path.dirname(os.path.abspath(own))), os.path.basename(own))
        if llmc_server.is_under(real, real_dirs):
            continue  # covered with llmc's directory
        for path, key in declared:
            if llmc_server.is_under(real, [path]) and (key == "write_paths" or what == "audit log"):
                raise ConfigError(
                    f"server {server}: llmc's {what} {own} is inside its {key} {path} (the server could put a link "
                    f"in the place of a file llmc writes there, or read it): move the {what} out of it"
                )
    for what, own in named.items():
        link = _link_on_the_way(os.path.abspath(os.path.expanduser(own)), list(sandbox.write_paths))
        if link:
            raise ConfigError(
                f"server {server}: {link} (on the way to llmc's {what} {own}) is a symbolic link inside its "
                "write_paths: the server could point it elsewhere; name the real path, or declare a narrower path"
            )


def _link_on_the_way(path: str, writable: list[str]) -> str | None:
    """The first symbolic link among `path` and its ancestors whose own name (its parent
    resolved) lies inside one of `writable`; None when there is none."""
    parts = path.split("/")
    for i in range(2, len(parts) + 1):
        name = "/".join(parts[:i])
        if os.path.islink(name):
            where = os.path.join(os.path.realpath(os.path.dirname(name)), os.path.basename(name))
            if llmc_server.is_under(where, writable):
                return name
    return None


def _launch(spec: ServerSpec, sandbox: SandboxSpec, bwrap: str, profile: LoadedProfile | None) -> list[str]:
    from llmc_cli.mcp.transports.child import child_environment

    for path in (*sandbox.read_paths, *sandbox.write_paths):
        if not os.path.exists(path):
            raise ConfigError(f"server {spec.name}: {path} (in read_paths or write_paths) does not exist")
    env = child_environment(dict(spec.env))
    protected = protected_paths(profile)
    home = str(ensure_private_dir(state_dir() / "sandbox" / _home_name(profile, spec.name)))
    cwd = os.path.realpath(spec.cwd) if spec.cwd else home
    if spec.cwd and not sandbox.visible(cwd):
        raise ConfigError(
            f"server {spec.name}: its cwd {spec.cwd} is not inside its read_paths or write_paths (the sandbox would not show it)"
        )
    readable = _install_trees(spec.command, env.get("PATH", ""), spec.cwd, protected)
    hidden, hidden_dirs = _protected_names(protected)
    setenv = {"HOME": home, "TMPDIR": "/tmp", "npm_config_cache": os.path.join(home, ".npm")}
    argv = llmc_server.bwrap_argv(
        bwrap,
        list(spec.command),
        cwd=cwd,
        whole_system=False,
        readable=[p for p in readable if not sandbox.visible(p)] + list(sandbox.read_paths),
        writable=list(sandbox.write_paths),
        hidden=hidden,
        hidden_dirs=hidden_dirs,
        network=sandbox.network,
        home=home,
        setenv={k: v for k, v in setenv.items() if k not in spec.env},
        unsetenv=["XDG_RUNTIME_DIR"],
    )
    full = llmc_server.limited(LIMITS, argv, keep=False)
    return full[: len(full) - len(spec.command)]


def _home_name(profile: LoadedProfile | None, server: str) -> str:
    """A directory name for (profile, server): readable, and unique even for odd names and for
    two profile files of the same name in different directories."""
    key = f"{(os.path.realpath(profile.path) if profile.path else profile.name) if profile else '-'}\0{server}"
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{profile.name if profile else 'adhoc'}.{server}")[:80]
    return f"{safe}-{sha256(key.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"


def _protected_names(protected: list[str]) -> tuple[list[str], list[str]]:

    names = llmc_server.Protected(protected)
    return names.names, names.dirs


def _resolve(exe: str, path: str, cwd: str | None) -> str | None:
    if "/" in exe:
        full = exe if os.path.isabs(exe) else os.path.join(cwd or os.getcwd(), exe)
        return os.path.abspath(full) if os.path.isfile(full) else None

    found = which(exe, path=path)
    return os.path.abspath(found) if found else None


def _install_trees(command: tuple[str, ...], path: str, cwd: str | None, protected: list[str]) -> list[str]:
    """What a server's command needs to read: the executable and its install tree, the
    interpreter of a script (its #! line), and an interpreter's script and its tree, each at the
    path as written and as resolved (symbolic links)."""
    found: list[str] = []
    exe = _resolve(command[0], path, cwd)
    if exe is None:
        return found  # bubblewrap says "No such file": the transport's error shows it
    found += _trees(exe, protected, script=False)
    interpreter = exe
    shebang = _shebang(exe)
    if shebang:  # a script: its interpreter (`/usr/bin/env node`: node on PATH) is needed too
        words = shebang.split()
        name = words[1] if os.path.basename(words[0]) == "env" and len(words) > 1 else words[0]
        resolved = _resolve(name, path, cwd)
        if resolved:
            found += _trees(resolved, protected, script=False)
            interpreter = resolved
    if INTERPRETERS.match(os.path.basename(os.path.realpath(interpreter))) and not shebang:
        args = iter(command[1:])
        for arg in args:
            if arg in ("-m", "-c", "-e", "--eval", "-p", "--print", "-r", "--require", "--import"):
                break  # a module or inline code, not a script file
            if arg.startswith("-"):
                continue
            script = _resolve(arg, "", cwd) if "/" in arg or os.path.isfile(os.path.join(cwd or os.getcwd(), arg)) else None
            if script:
                found += _trees(script if "/" in arg else os.path.join(cwd or os.getcwd(), arg), protected, script=True)
            break
    return list(dict.fromkeys(found))


def _trees(path: str, protected: list[str], *, script: bool) -> list[str]:
    """The install tree of a file, as written and as resolved: the outermost node_modules above
    it, else the virtualenv (pyvenv.cfg) above it, else PREFIX of PREFIX/bin/NAME, else (a
    script) its directory, else the file itself; never a tree that holds the home directory or
    llmc's own files (then the file alone), and nothing the system directories already show."""

    home = os.path.realpath(os.path.expanduser("~"))
    out = []
    for name in dict.fromkeys([os.path.abspath(path), os.path.realpath(path)]):
        tree = _tree_of(name, script)
        too_wide = (
            tree in ("/", "")
            or home == tree
            or home.startswith(tree.rstrip("/") + "/")
            or any(p.rstrip("/") == tree or p.startswith(tree.rstrip("/") + "/") for p in protected)
        )
        chosen = name if too_wide else tree
        if not any(chosen == d or chosen.startswith(d + "/") for d in llmc_server.SYSTEM_DIRS):
            out.append(chosen)
    return out


def _tree_of(path: str, script: bool) -> str:
    parts = path.split("/")
    if "node_modules" in parts:
        return "/".join(parts[: parts.index("node_modules") + 1])
    directory = os.path.dirname(path)
    level = directory
    for _ in range(4):  # a virtualenv: ROOT/bin/python, ROOT/pyvenv.cfg
        if os.path.isfile(os.path.join(level, "pyvenv.cfg")):
            return level
        level = os.path.dirname(level)
    if os.path.basename(directory) == "bin":
        return os.path.dirname(directory)
    return directory if script else path


def _shebang(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            head = f.read(256)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    return head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").strip() or None


def protect(specs: list[ServerSpec], profile: LoadedProfile | None, require_sandbox: bool = False) -> list[ServerSpec]:
    """Tell llmc's own servers where llmc's own files are: the built-in workspace server through
    its options, llmc run as a stdio child (`llmc serve workspace`, whose environment is
    allow-listed) through PROTECTED_PATHS_VAR, set after the profile's env so it cannot be
    replaced, and a nested llmc (`llmc serve -p ops`) its directories, so it finds the same
    profiles and state, unless the server's own env says otherwise. Both only ever add paths to
    what the server protects. A third-party server is not handed this map of what to go after (a
    sandbox covers those files instead). `require_sandbox`: a nested llmc is also told to keep
    the sandbox rule (REQUIRE_SANDBOX_VAR), so a server of its own cannot run unsandboxed
    where this one's could not."""
    paths = protected_paths(profile)
    out = []
    for spec in specs:
        if spec.builtin == "workspace" and isinstance(spec.options.get("protect", []), list):
            extra = [p for p in spec.options.get("protect", []) if p not in paths]
            spec = replace(spec, options={**spec.options, "protect": [*extra, *paths]})
        elif spec.command and is_llmc_command(spec.command, spec.env):
            told = {PROTECTED_PATHS_VAR: json.dumps(paths), **({REQUIRE_SANDBOX_VAR: "1"} if require_sandbox else {})}
            spec = replace(spec, env={**own_directories(), **spec.env, **told})
        out.append(spec)
    return out


def launch_specs(
    profile: LoadedProfile | None,
    only: tuple[str, ...] = (),
    adhoc: ServerSpec | None = None,
    timeout: float | None = None,
    connect_timeout: float | None = None,
    require_sandbox: bool = False,
) -> tuple[list[ServerSpec], dict[str, ConfigError]]:
    """The servers a command starts itself (a catalog, a session keeper, the gateway): the
    ad-hoc one, or the profile's (only those named in `only`, when given) that can be configured,
    each told where llmc's own files are (llmc's own servers), contained as the profile says
    (services/sandbox.py) and given `timeout` and `connect_timeout` (--timeout and
    --connect-timeout, over each server's own). Second: the profile's servers that cannot be
    configured (an unset ${VAR}, a sandbox that cannot be made), each with its error: that
    server's problem, not the command's. `require_sandbox` (a gateway serving principals, or
    with any inbound auth: see `authenticated`): ConfigError naming the first stdio server that
    would run unsandboxed without the profile saying sandbox = "none" for it; also when the llmc
    that started this one ran under that rule (config.paths.REQUIRE_SANDBOX_VAR), whatever the
    nesting, and passed on to llmc's own children."""
    require_sandbox = require_sandbox or sandbox_required_by_parent()
    if adhoc is None and profile is None:
        raise ValueError("launch_specs needs a profile or an ad-hoc server")
    specs, unusable = ([adhoc], {}) if adhoc else config.usable_specs(profile, only)  # type: ignore[arg-type]
    contained = []
    for spec in protect(specs, profile, require_sandbox):
        try:
            contained.append(contain(spec, profile, required=require_sandbox))
        except ConfigError as exc:
            if require_sandbox:
                raise
            unusable[spec.name] = exc
    warn_unsandboxed(contained)
    specs = contained
    if timeout:
        specs = [replace(spec, timeout=timeout) for spec in specs]
    if connect_timeout:
        specs = [replace(spec, connect_timeout=connect_timeout) for spec in specs]
    return specs, unusable


class Launched:
    """A command's servers as launch_specs decided them (`specs`, and `unusable`: those that
    cannot be configured) and, once start() ran, the stdio ones it uses first, started
    (`started`, by name). Made and given to whoever ends the command before anything starts, so
    that close() stops every process it started however the command ends: the catalog made
    from it (services.open_catalog) uses them meanwhile, and closes them itself as it closes
    its connections (a second close is nothing)."""

    def __init__(self, specs: list[ServerSpec], unusable: dict[str, ConfigError]) -> None:
        self.specs, self.unusable = specs, unusable
        self.started: dict[str, StdioTransport] = {}

    def start(self, first: Collection[str] | None = None) -> None:
        """Start the stdio servers among `first` (None: every one). One that cannot be started is
        left to the connection that needs it, which fails as it always does (and reports it
        where the command reports failures)."""
        for spec in self.specs:
            if spec.kind != "stdio" or (first is not None and spec.name not in first):
                continue
            transport = transports.StdioTransport(spec.command, env=dict(spec.env), cwd=spec.cwd, launch=spec.launch)
            self.started[spec.name] = transport  # held before it runs: close() finds it whatever happens next
            try:
                transport.spawn()
            except LlmcError:
                del self.started[spec.name]

    def close(self) -> None:
        """Stop every process started here that is still running."""
        for transport in list(self.started.values()):
            transport.close()


def launch(
    profile: LoadedProfile | None,
    only: tuple[str, ...] = (),
    adhoc: ServerSpec | None = None,
    timeout: float | None = None,
    connect_timeout: float | None = None,
) -> Launched:
    """The command's servers as launch_specs decides them (arguments as there), none started yet."""
    return Launched(*launch_specs(profile, only, adhoc, timeout, connect_timeout))
