"""The one way llmc builds a contained process: resource limits (set by a small exec trampoline,
since preexec_fn is unsafe in a threaded program), then bubblewrap with llmc's own files covered.

Used by the workspace server for the commands it runs (launcher.py) and by services for every
third-party stdio server a profile sandboxes (services/sandbox.py): one command line, two callers.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from llmc_cli.config.paths import which

FIXED_PATH = "/usr/local/bin:/usr/bin:/bin"
# What llmc starts for each process (stdlib only, run with -I -S): argv[1] is the limits
# (RLIMIT_NAME=VALUE,...; PIDS=N: a pids cgroup when run as root), then the resource limits are set and argv[3:] runs. With bwrap (argv[2] ==
# "exec") it becomes bwrap, whose PID namespace holds the tree. Without (argv[2] == "keep"), a
# KEEPER stays beside the command: a child subreaper (PR_SET_CHILD_SUBREAPER), so every process
# of the tree that is orphaned (background children, double forks, setsid, closed descriptors,
# wiped environment: nothing escapes this) becomes its child, and it lives, ignoring
# SIGTERM/SIGHUP/SIGINT and reaping, until the last one is gone. It keeps the tree's marker and
# tag, so kill_trees finds it and, through it, all of them. This process itself waits for the
# command and exits with its status (128+N for signal N), so `running` and `exitCode` are the
# command's.
_LAUNCH = r"""
import os, resource, signal, sys
def pids_cgroup(limit):
    # Root is exempt from RLIMIT_NPROC: a pids cgroup of its own bounds the tree instead, where
    # this process may make one (cgroup v1 "pids", or v2 with pids delegated here). Empty ones
    # left by earlier trees are removed first (rmdir fails on a cgroup still in use).
    for line in open("/proc/self/cgroup"):
        hierarchy, controllers, path = line.rstrip("\n").split(":", 2)
        base = "/sys/fs/cgroup/pids" + path if "pids" in controllers.split(",") else \
            "/sys/fs/cgroup" + path if hierarchy == "0" else None
        if base is None or not os.path.isdir(base):
            continue
        if hierarchy == "0":
            try:
                if "pids" not in open(os.path.join(base, "cgroup.subtree_control")).read().split():
                    continue
            except OSError:
                continue
        try:
            for old in os.listdir(base):
                if old.startswith("llmc-sandbox-"):
                    try:
                        os.rmdir(os.path.join(base, old))
                    except OSError:
                        pass
            mine = os.path.join(base, f"llmc-sandbox-{os.getpid()}")
            os.mkdir(mine)
            with open(os.path.join(mine, "pids.max"), "w") as f:
                f.write(str(limit))
            with open(os.path.join(mine, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
            return
        except OSError:
            continue
for item in filter(None, sys.argv[1].split(",")):
    name, value = item.split("=")
    if name == "PIDS":
        if os.geteuid() == 0:
            pids_cgroup(int(value))
        continue
    kind, value = getattr(resource, name), int(value)
    hard = resource.getrlimit(kind)[1]
    value = value if hard == resource.RLIM_INFINITY else min(value, hard)
    cpu_hard = value + 1 if hard == resource.RLIM_INFINITY else min(value + 1, hard)
    resource.setrlimit(kind, (value, cpu_hard if name == "RLIMIT_CPU" else value))
argv = sys.argv[3:]
try:
    import ctypes
    prctl = ctypes.CDLL(None, use_errno=True).prctl
except Exception:
    prctl = None
if sys.argv[2] == "exec" or prctl is None:
    os.execv(argv[0], argv)
status_r, status_w = os.pipe()
if os.fork() == 0:  # the keeper
    os.close(status_r)
    prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER (not inherited: set here, before the command starts)
    command = os.fork()
    if command == 0:
        os.close(status_w)
        try:
            os.execv(argv[0], argv)
        except OSError as exc:
            os.write(2, f"cannot run {argv[0]}: {exc.strerror}\n".encode())
        os._exit(127)
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)  # the command's pipes are the command's: their end of file is its
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            os._exit(0)
        except InterruptedError:
            continue
        if pid == command:
            os.write(status_w, str(status).encode())
            os.close(status_w)
os.close(status_w)
null = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(null, fd)
data = b""
while chunk := os.read(status_r, 64):
    data += chunk
if not data:
    os._exit(125)  # the keeper died before the command ended
status = int(data)
os._exit(128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status))
"""

# Directories of the system a sandboxed server sees read-only (those that exist here); a
# symbolic link among them (/bin -> usr/bin) is recreated as the same link.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
# Files of /etc no server needs and root could read: password hashes, sudo rules, host keys.
SYSTEM_SECRETS = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssh",
    "/etc/ssl/private",
)


def find_bwrap(path: str = FIXED_PATH) -> str | None:
    found = which("bwrap", path=path)
    return os.path.realpath(found) if found else None


_usable: dict[str, bool] = {}


def bwrap_usable(bwrap: str | None) -> bool:
    """Does bubblewrap work here (installed, and allowed to make its namespaces: a container may
    forbid it)? Asked once per process: it costs a process start."""
    if bwrap is None:
        return False
    if bwrap not in _usable:
        probe = [
            bwrap,
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--unshare-pid",
            "--unshare-user",
            "--unshare-net",
            "--cap-drop",
            "ALL",
            "--die-with-parent",
            "--",
            "/bin/true",
        ]
        import subprocess  # only to probe bwrap once: a call that starts no sandbox does not load it

        try:
            _usable[bwrap] = (
                subprocess.run(
                    probe, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10
                ).returncode
                == 0
            )
        except (OSError, subprocess.SubprocessError):
            _usable[bwrap] = False
    return _usable[bwrap]


def limited(limits: dict[str, int], argv: list[str], *, keep: bool) -> list[str]:
    """The argv that runs `argv` under resource limits (RLIMIT_* name -> value; PIDS -> the most
    processes and threads of the tree, by a cgroup, when llmc runs as root). `keep`: a keeper
    stays beside the command (no PID namespace holds its tree); else the trampoline becomes it."""
    spec = ",".join(f"{name}={int(value)}" for name, value in limits.items())
    return [sys.executable, "-I", "-S", "-c", _LAUNCH, spec, "keep" if keep else "exec", *argv]


def bwrap_argv(
    bwrap: str,
    argv: list[str],
    *,
    cwd: str,
    writable: Sequence[str],
    readable: Sequence[str] = (),
    hidden: Sequence[str] = (),
    hidden_dirs: Sequence[str] = (),
    network: bool = False,
    whole_system: bool = True,
    home: str | None = None,
    setenv: dict[str, str] | None = None,
    unsetenv: Sequence[str] = (),
) -> list[str]:
    """bubblewrap's command line for `argv`: the system read-only (`whole_system`: all of "/";
    else SYSTEM_DIRS without SYSTEM_SECRETS, and `readable`), `writable` bound read-write,
    llmc's own files (`hidden`) covered even inside them, a private /tmp, `home` (a private
    directory) bound read-write last, its own PID, IPC and UTS namespaces (and, for the narrow
    view, its own user namespace), no capabilities (also when llmc runs as root), no network
    unless `network`, killed with its parent, in a new session."""
    cmd = [bwrap]
    if whole_system:
        cmd += ["--ro-bind", "/", "/"]
    else:
        for name in SYSTEM_DIRS:
            if os.path.islink(name):
                cmd += ["--symlink", os.readlink(name), name]
            elif os.path.isdir(name):
                cmd += ["--ro-bind", name, name]
        if network and os.path.islink("/etc/resolv.conf"):  # systemd-resolved: the file lives under /run
            cmd += ["--ro-bind-try", *[os.path.dirname(os.path.realpath("/etc/resolv.conf"))] * 2]
    cmd += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    # After the /tmp tmpfs, so a path under /tmp stays visible; the shorter path first, so a
    # read-only path inside a writable one (or the reverse) is what it says.
    binds = sorted(
        [(p, "--ro-bind") for p in readable] + [(p, "--bind") for p in writable],
        key=lambda bind: (bind[0].rstrip("/").count("/"), bind[0]),
    )
    for path, how in binds:
        cmd += [how, path, path]
    visible = ["/"] if whole_system else [*SYSTEM_DIRS, *readable, *writable]
    shown = [name for name in hidden if is_under(name, visible)]
    hide = hide_args(shown, [d for d in hidden_dirs if is_under(d, visible)], list(writable))
    if not whole_system:
        hide += hide_args([p for p in SYSTEM_SECRETS if os.path.lexists(p)], [], [])
    if home is not None:
        # A private home may live in llmc's state directory, covered (when a declared path shows
        # it) by a tmpfs made read-only: the home is bound between the two.
        covering = [i for i in range(len(hide) - 1) if hide[i] == "--remount-ro" and is_under(home, [hide[i + 1]])]
        at = covering[-1] if covering else len(hide)
        hide[at:at] = ["--bind", home, home]
    cmd += hide
    cmd += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--cap-drop", "ALL"]
    if not whole_system:
        cmd.append("--unshare-user")  # a process count of its own (RLIMIT_NPROC), no privilege outside
    if not network:
        cmd.append("--unshare-net")
    for name, value in (setenv or {}).items():
        cmd += ["--setenv", name, value]
    for name in unsetenv:
        cmd += ["--unsetenv", name]
    cmd += ["--die-with-parent", "--new-session", "--chdir", cwd, "--", *argv]
    return cmd


def hide_args(hidden: list[str], hidden_dirs: list[str], roots: list[str]) -> list[str]:
    """bwrap arguments that cover llmc's own files: an empty read-only tmpfs on each protected
    directory, /dev/null (read-only) on each protected file and the files beside it that
    extend its name (audit.jsonl.1, .lock, ...). A mount point can be neither renamed, nor
    replaced, nor hard-linked to (EBUSY/EXDEV); the kernel does let a directory that CONTAINS
    one be renamed, so every ancestor inside a writable root is bound onto itself first. A
    protected directory that does not exist yet inside a root is created (empty, 0700) so it
    can be covered; otherwise a process could create it with content of its choosing."""
    for name in hidden_dirs:
        if not os.path.lexists(name) and any(name.startswith(r.rstrip("/") + "/") for r in roots):
            try:
                os.makedirs(name, mode=0o700, exist_ok=True)
            except OSError:
                pass
    covered = [d for d in hidden if os.path.isdir(d) and not os.path.islink(d)]
    hidden = [n for n in hidden if not any(n.startswith(d.rstrip("/") + "/") for d in covered)]  # under a tmpfs
    args = _pin_ancestors(hidden, roots)
    for name in hidden:
        if os.path.islink(name):
            continue  # its target is in the list too
        if os.path.isdir(name):
            args += ["--tmpfs", name, "--remount-ro", name]
        elif os.path.isfile(name):
            args += _cover_file(name)
    return args


def _pin_ancestors(hidden: list[str], roots: list[str]) -> list[str]:
    """`--bind` of each directory inside a root on the way to a hidden name, onto itself (a mount
    point cannot be renamed), each once."""
    args: list[str] = []
    pinned: set[str] = set()
    for name in hidden:
        for root in roots:
            if not name.startswith(root.rstrip("/") + "/"):
                continue
            parts = os.path.relpath(os.path.dirname(name), root).split("/")
            if parts[0] == ".":
                continue
            for i in range(1, len(parts) + 1):
                ancestor = os.path.join(root, *parts[:i])
                if ancestor not in pinned and os.path.isdir(ancestor) and not os.path.islink(ancestor):
                    pinned.add(ancestor)
                    args += ["--bind", ancestor, ancestor]
    return args


def _cover_file(name: str) -> list[str]:
    """/dev/null, read-only, on a protected file and on the files beside it that extend its name."""
    head, tail = os.path.split(name)
    try:
        siblings = sorted(n for n in os.listdir(head) if n.startswith(tail + "."))
    except OSError:
        siblings = []
    args: list[str] = []
    for path in [name, *(os.path.join(head, n) for n in siblings)]:
        if os.path.isfile(path) and not os.path.islink(path):
            args += ["--ro-bind", "/dev/null", path]
    return args


def is_under(path: str, dirs: list[str]) -> bool:
    """Whether `path` is one of `dirs` or inside one (paths as strings, already resolved)."""
    return any(path == d or path.startswith(d.rstrip("/") + "/") for d in dirs)
