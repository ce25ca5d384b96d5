"""Least privilege per profile: decide(call) -> allow | deny | confirm, with the rule behind it.

Configured in the profile's [policy] table (config/schema.py PolicyConfig):
- `default`, `allow`, `deny`: globs over `server.tool`; deny wins; a tool the profile may not
  use is also hidden from listings and from the model.
- `read_only`: only tools whose effective readOnlyHint is true. Effective hints are the tool's
  annotations with the profile's `hints` on top; missing annotations take the spec's defaults
  (not read-only, destructive, not idempotent, open world).
- `confirm` globs (every caller), and every effectively destructive tool when
  `confirm_destructive` (only calls a model chose: a command a person typed is its own
  confirmation): a human's yes, `--yes`, or the exact call pre-approved by its hash in `approved`.
- `args`: path globs per argument. Every string under a ruled argument (in lists and objects
  too) must be a path under one of them, judged as the kernel walks it (touched_paths): a
  denied file cannot be reached by spelling it differently, relative paths start at the
  server's working directory (unknown: refused).
- `calls_per_minute` and `tool_calls_per_minute`: enforced across processes (state dir + lock).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
import stat
import time
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterator, Literal

from llmc_cli.config.profiles import expand
from llmc_cli.errors import ConfigError, PolicyDenied
from llmc_cli.model import Tool, ToolCall

# Who chose a call. A person who typed `llmc call` (or wrote a batch file) has decided; a call a
# model chose (`ask`, sampling, the gateway) is what confirm_destructive guards against.
Caller = Literal["human", "model"]
HUMAN: Caller = "human"
MODEL: Caller = "model"

SPEC_DEFAULT_HINTS = {"readOnly": False, "destructive": True, "idempotent": False, "openWorld": True}
WINDOW_SECONDS = 60.0


@dataclass
class Decision:
    action: str  # allow | deny | confirm
    rule: str  # which setting decided, e.g. "deny: fs.delete_*"
    reason: str
    call_hash: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


def call_hash(call: ToolCall) -> str:
    """Identity of one exact call: HMAC-SHA256 under this installation's approval key over
    canonical JSON of server.tool and the (unmasked) arguments. Keyed, because the hash is written
    next to masked arguments in the audit log: an unkeyed hash of a short password is undone by
    guessing. Lone surrogates pass through (surrogatepass) so that any call has a hash."""
    import hmac

    canonical = json.dumps({"tool": call.qualified_name, "arguments": call.arguments},
                           sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    digest = hmac.new(approval_key(), canonical.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()
    return "hmac-sha256:" + digest


APPROVAL_KEY_ENV = "LLMC_APPROVAL_KEY"
APPROVAL_KEY_MIN_CHARS = 32


def approval_key() -> bytes:
    """$LLMC_APPROVAL_KEY (the same value on every machine that shares approved hashes), else
    `approval.key` in the state directory, created on first use."""
    shared = os.environ.get(APPROVAL_KEY_ENV)
    if shared:
        if len(shared) < APPROVAL_KEY_MIN_CHARS:
            raise ConfigError(f"{APPROVAL_KEY_ENV} must be at least {APPROVAL_KEY_MIN_CHARS} characters "
                              "(e.g. 64 random hex digits)")
        return shared.encode("utf-8")
    from llmc_cli.config.paths import state_dir

    return _key_file(state_dir() / "approval.key")


@lru_cache(maxsize=4)
def _key_file(path: Path) -> bytes:
    """Read the key, or create it: 0600, written whole under a temporary name, then hard-linked
    to its name, which fails if another process got there first (then its key is the key)."""
    import secrets
    import tempfile

    from llmc_cli.config.paths import ensure_private_dir

    try:
        if not path.exists():
            ensure_private_dir(path.parent)
            fd, temp = tempfile.mkstemp(dir=path.parent, prefix=".approval.key.", suffix=".tmp")
            try:
                with os.fdopen(fd, "w", encoding="ascii") as fh:
                    fh.write(secrets.token_hex(32) + "\n")
                    fh.flush()
                    os.fsync(fh.fileno())
                try:
                    os.link(temp, path)
                except FileExistsError:
                    pass
            finally:
                os.unlink(temp)
        key = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read or create the approval key {path}: {getattr(exc, 'strerror', None) or exc}") \
            from None
    if len(key) < APPROVAL_KEY_MIN_CHARS:
        raise ConfigError(f"the approval key {path} is damaged (too short): remove it to make a new one "
                          "(approved hashes must then be approved again)")
    return key.encode("ascii")


def effective_hints(tool: Tool | None, qualified: str, config: Any) -> dict[str, bool]:
    hints = dict(SPEC_DEFAULT_HINTS)
    annotations = tool.annotations if tool else {}
    for key in hints:
        value = annotations.get(f"{key}Hint")
        if isinstance(value, bool):
            hints[key] = value
    for pattern, override in config.hints.items():
        if glob_match(pattern, qualified):
            hints.update({k: v for k, v in asdict(override).items() if v is not None})
    if hints["readOnly"] and not any(glob_match(p, qualified) and o.destructive for p, o in config.hints.items()):
        hints["destructive"] = False  # the spec: destructiveHint is meaningful only when not read-only
    return hints


def visible(tool: Tool, config: Any) -> Decision:
    """May this profile use this tool at all? (Listings and the model see only allowed tools.)"""
    return _access(tool.qualified_name, tool, config)


def is_read_only(tool: Tool | None, qualified: str, config: Any) -> bool:
    """The one answer to "is this tool read-only?" under a profile: its annotations with the
    profile's [policy.hints] on top. `read_only` profiles, batch and `ask` parallelism all ask here."""
    return effective_hints(tool, qualified, config)["readOnly"]


def decide(call: ToolCall, tool: Tool | None, config: Any, *, caller: Caller, cwd: str | None = None,
           approved: Callable[[str], bool] | None = None) -> Decision:
    """The decision on one call. Deny, read-only and argument rules hold for every caller;
    `confirm` patterns too; `confirm_destructive` only for calls a model chose. `cwd`: the
    server's working directory when llmc knows it (relative path arguments are judged against
    it; unknown, they are refused under a path rule). `approved`: hashes pre-approved outside
    the profile (the state database), asked only for a call that needs a confirmation."""
    qualified = call.qualified_name
    access = _access(qualified, tool, config)
    digest = call_hash(call)
    if access.action == "deny":
        access.call_hash = digest
        return access
    for pattern, rules in config.args.items():
        if not glob_match(pattern, qualified):
            continue
        for arg, globs in rules.items():
            where = f"args.{pattern}.{arg}"
            if arg in call.arguments:
                value = call.arguments[arg]
            else:
                value = _schema_default(tool, arg)  # the server falls back to it: judge what it touches
                if value is None:
                    continue
            globs = [expand(g, f"policy.{where}") for g in globs]  # ${VAR} as in servers
            refusal = _judge_argument(arg, value, globs, cwd)
            if refusal:
                return Decision("deny", where, refusal, digest)
    hints = effective_hints(tool, qualified, config)
    needs = next((f"confirm: {p}" for p in config.confirm if glob_match(p, qualified)), None)
    if needs is None and caller == MODEL and config.confirm_destructive and hints["destructive"]:
        needs = "confirm_destructive"
    if needs is None:
        return Decision("allow", access.rule, access.reason, digest)
    if digest in config.approved or (approved is not None and approved(digest)):
        return Decision("allow", "approved", f"this exact call is pre-approved ({needs})", digest)
    why = "the tool is destructive" if needs == "confirm_destructive" else f"it matches {needs[9:]}"
    return Decision("confirm", needs, f"{qualified} needs a confirmation: {why}", digest)


def _schema_default(tool: Tool | None, arg: str) -> Any:
    prop = ((tool.input_schema or {}).get("properties") or {}).get(arg) if tool else None
    return prop.get("default") if isinstance(prop, dict) else None


def _judge_argument(arg: str, value: Any, globs: list[str], cwd: str | None) -> str | None:
    """Why the value of a ruled argument is refused, or None. Every string inside it (lists and
    objects at any depth) must be a path under one of the globs; any other leaf (number, bool,
    null) is refused: a server could read it as a path or fall back to a default we cannot see."""
    patterns = [p for g in globs for p in glob_patterns(g, cwd)]
    try:
        leaves = list(_leaves(arg, value))
    except PathRefused as exc:
        return f"argument {arg} {exc}"
    for where, leaf in leaves:
        if not isinstance(leaf, str):
            return f"argument {where} is {json.dumps(leaf)}: under a path rule every value must be a string path"
        try:
            touched = touched_paths(leaf, cwd)
        except PathRefused as exc:
            return f"argument {where}={leaf!r} is refused: {exc}"
        for real in touched:
            if not any(_path_regex(head, tail).match(real) for head, tail in patterns):
                return f"argument {where}={leaf!r} (resolved {real}) matches none of {globs}"
    return None


def _leaves(where: str, value: Any, depth: int = 0) -> Iterator[tuple[str, Any]]:
    if isinstance(value, (list, dict)) and depth >= MAX_NESTING:
        raise PathRefused(f"nests deeper than {MAX_NESTING} levels")  # no recursion a model can exhaust
    if isinstance(value, list):
        for i, item in enumerate(value):
            yield from _leaves(f"{where}[{i}]", item, depth + 1)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(f"{where}.{key}", item, depth + 1)
    else:
        yield where, value


def _access(qualified: str, tool: Tool | None, config: Any) -> Decision:
    denied = next((p for p in config.deny if glob_match(p, qualified)), None)
    if denied:
        return Decision("deny", f"deny: {denied}", f"{qualified} matches deny pattern {denied!r}")
    allowed = next((p for p in config.allow if glob_match(p, qualified)), None)
    if not allowed and config.default == "deny":
        return Decision("deny", "default: deny", f"{qualified} matches no allow pattern and the default is deny")
    if config.read_only and not is_read_only(tool, qualified, config):
        return Decision("deny", "read_only", f"the profile is read-only and {qualified} is not a read-only tool")
    return Decision("allow", f"allow: {allowed}" if allowed else "default: allow",
                    f"{qualified} is allowed" + (f" by {allowed!r}" if allowed else " by default"))


# -- paths, as the kernel resolves them -------------------------------------------------------------

MAX_SYMLINKS = 40  # the kernel's own limit (ELOOP beyond it): a longer chain is refused, not followed
MAX_NESTING = 64  # lists/objects under a ruled argument deeper than this are refused


class PathRefused(Exception):
    """A path argument llmc cannot judge safely; the call is denied with this reason."""


def touched_paths(value: str, cwd: str | None) -> list[str]:
    """The physical paths a server may touch when given the path `value`: resolved the way the
    kernel walks it, component by component, following each symlink where it is met (so
    `link/..` is the parent of the link's target, not the folder holding the link). A path whose
    last component is a symlink also names the link itself (unlink and rename act on the link,
    open on its target), so both are returned. Components that do not exist (yet) are taken as
    written; a `..` after one only cancels it. `~` is expanded, a `file:` URI read as its path,
    a relative path joined to `cwd` (the server's working directory; None: unknown, refused).
    Many servers normalise a path as text first (Node's path.resolve, Python's abspath) and so
    touch what the text means once `..` has eaten the link, so that reading is resolved and
    returned too: every reading a server may take must be allowed.
    Raises PathRefused for NUL bytes, symlink chains longer than the kernel follows (loops
    included), unreadable components, and relative paths without a known cwd."""
    path = _absolute(value, cwd)
    touched = _resolve(path)
    for textual in _resolve(os.path.normpath(path)):
        if textual not in touched:
            touched.append(textual)
    return touched


def _absolute(value: str, cwd: str | None) -> str:
    if "\x00" in value:
        raise PathRefused("it contains a NUL byte")
    if value.startswith("file:"):
        value = _file_uri_path(value)
    path = os.path.expanduser(value) if value.startswith("~") else value
    if not path.startswith("/"):
        if cwd is None:
            raise PathRefused("it is a relative path and llmc does not know the server's working directory "
                              "(remote, or run by a session keeper without a `cwd`): give an absolute path")
        path = os.path.join(cwd, path)  # "" is the working directory itself, as servers read it
    return path


def _file_uri_path(uri: str) -> str:
    from urllib.parse import unquote, urlsplit

    parts = urlsplit(uri)
    if parts.netloc not in ("", "localhost") or parts.query or parts.fragment:
        raise PathRefused("it is a file: URI with a host, query or fragment (only file:///absolute/path is judged)")
    path = unquote(parts.path)
    if "\x00" in path:
        raise PathRefused("it contains a NUL byte")
    return path


def _resolve(path: str) -> list[str]:
    todo = path.split("/")[::-1]  # components still to walk, the next one last
    done: list[str] = []  # the physical path walked so far, one component each
    missing = 0  # how many trailing components of `done` do not exist (none of them can be a link)
    links = 0
    touched: list[str] = []
    while todo:
        name = todo.pop()
        if name in ("", "."):
            continue
        if name == "..":
            if done:
                done.pop()
                missing = max(0, missing - 1)
            continue
        if missing:
            done.append(name)
            missing += 1
            continue
        here = "/" + "/".join([*done, name])
        try:
            st = os.lstat(here)
        except (FileNotFoundError, NotADirectoryError):
            done.append(name)
            missing = 1
            continue
        except OSError as exc:
            raise PathRefused(f"{here} cannot be examined ({exc.strerror})") from None
        if not stat.S_ISLNK(st.st_mode):
            done.append(name)
            continue
        links += 1
        if links > MAX_SYMLINKS:
            raise PathRefused(f"too many levels of symbolic links at {here} (a loop?)")
        if all(rest in ("", ".") for rest in todo):
            touched.append(here)  # the last component: the link itself may be what is acted on
        try:
            target = os.readlink(here)
        except OSError as exc:
            raise PathRefused(f"{here} cannot be examined ({exc.strerror})") from None
        if target.startswith("/"):
            done = []
        todo.extend(target.split("/")[::-1])
    touched.append("/" + "/".join(done))
    return touched


def glob_patterns(glob: str, cwd: str | None) -> list[tuple[str, str]]:
    """A rule's path glob as (literal head, wildcard tail) pairs, the head resolved like the paths
    it is matched against (a relative head at `cwd`, else at llmc's working directory). A head
    whose last component is a symlink gives two pairs: its target, and the link itself. A head
    that cannot be resolved matches nothing."""
    cut = min((glob.find(c) for c in "*?[" if c in glob), default=len(glob))
    if cut == 0:
        return [("", glob)]  # starts with a wildcard: matched as written
    slash = glob.rfind("/", 0, cut) if cut < len(glob) else len(glob)
    head, tail = (glob[:slash], glob[slash:]) if slash >= 0 else (".", "/" + glob)
    try:
        heads = _resolve(_absolute(head or "/", cwd or os.getcwd()))  # the kernel's reading only: never widen a rule
    except PathRefused:
        return []
    return [(h if not tail else h.rstrip("/"), tail) for h in heads]


def glob_match(pattern: str, text: str) -> bool:
    """Tool globs over `server.tool` (fnmatch). Path globs go through glob_patterns."""
    return fnmatch.fnmatchcase(text, pattern)


@lru_cache(maxsize=256)
def _path_regex(head: str, tail: str) -> re.Pattern[str]:
    out, i = [re.escape(head)], 0
    while i < len(tail):
        if tail.startswith("/**", i) and (i + 3 == len(tail)):
            out.append(r"(?:/.*)?")
            i += 3
        elif tail.startswith("**", i):
            out.append(".*")
            i += 2
        elif tail[i] == "*":
            out.append("[^/]*")
            i += 1
        elif tail[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(tail[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


# -- lint: path-like arguments no rule covers ------------------------------------------------------

# Words that, in an argument's name (any word of sourcePath, output_file, ...), usually mean a path.
PATH_WORDS = frozenset({"path", "paths", "file", "files", "filename", "filenames", "filepath", "dir", "dirs",
                        "directory", "directories", "folder", "folders", "source", "sources", "destination",
                        "target", "cwd", "root", "roots", "src", "dest", "dst", "location"})
PATH_FORMATS = frozenset({"uri", "uri-reference", "iri", "iri-reference", "path", "file-path"})
_PATH_DESCRIPTION = re.compile(r"\b(paths?|director(?:y|ies)|folders?|file ?names?)\b", re.IGNORECASE)
_NOT_TEXT = frozenset({"number", "integer", "boolean", "null"})


def uncovered_path_arguments(tool: Tool, config: Any) -> list[tuple[str, str]]:
    """(argument, why) for each argument of a tool under an argument rule that looks like a path
    (by its name, its schema's format or its description, at any depth) but that no rule
    covers: the hole a rule on `path` leaves when the tool also takes `paths` or `destination`.
    [] for a tool no argument rule matches (`tools lint` reports these)."""
    covered = {arg for pattern, rules in config.args.items() if glob_match(pattern, tool.qualified_name) for arg in rules}
    if not covered:
        return []
    found = []
    for name, schema in ((tool.input_schema or {}).get("properties") or {}).items():
        why = None if name in covered else _path_like(name, schema)
        if why:
            found.append((name, f"{why}, but the argument rules on {tool.qualified_name} cover only "
                                f"{', '.join(sorted(covered))}: a path here is not checked"))
    return found


def _path_like(name: str, schema: Any, depth: int = 0) -> str | None:
    if not isinstance(schema, dict) or depth > 8:
        return None
    types = schema.get("type")
    if (set(types) if isinstance(types, list) else {types}) <= _NOT_TEXT:
        return None
    words = {w.lower() for w in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z0-9]+", name)}
    if words & PATH_WORDS:
        return f"its name {name!r} suggests a path"
    if schema.get("format") in PATH_FORMATS:
        return f"its schema has format {schema['format']!r}"
    if isinstance(schema.get("description"), str) and _PATH_DESCRIPTION.search(schema["description"]):
        return "its description speaks of paths"
    inner = [("items", schema.get("items"))] + list((schema.get("properties") or {}).items())
    inner += [("variant", v) for key in ("anyOf", "oneOf", "allOf") for v in schema.get(key) or []]
    for sub, sub_schema in inner:
        why = _path_like(name if sub in ("items", "variant") else sub, sub_schema, depth + 1)
        if why:
            return why if sub in ("items", "variant") else f"it holds {sub!r}: {why}"
    return None


# -- rate limits ------------------------------------------------------------------------------------

def acquire_rate(profile_name: str, qualified: str, config: Any, state_dir: Callable[[], Any],
                 database_url: str | None = None) -> None:
    """Count this call against the profile's and the tool's per-minute limits, across every llmc
    process of this user (a JSON file in the state directory under a file lock), or of every
    llmc on every machine using the state database `database_url`. PolicyDenied with a
    retry-after hint when a limit is reached; nothing is counted then. `state_dir` is called
    only when a limit applies (most calls have none and touch no file)."""
    limits: list[tuple[str, int]] = []
    if config.calls_per_minute:
        limits.append((f"profile:{profile_name}", config.calls_per_minute))
    for pattern, limit in config.tool_calls_per_minute.items():
        if glob_match(pattern, qualified):
            limits.append((f"tool:{profile_name}:{pattern}", limit))
    if not limits:
        return
    if database_url:
        from llmc_cli.store.postgres import Database

        now = time.time()
        full = Database.for_url(database_url).acquire_rate(limits, now, WINDOW_SECONDS)
        if full is not None:
            key, limit, oldest = full
            retry = max(0.1, WINDOW_SECONDS - (now - oldest))
            raise PolicyDenied(f"rate limit: {key.split(':')[0]} limit of {limit} calls per minute reached; "
                               f"retry after {retry:.1f}s", retryAfter=round(retry, 1), rule=key)
        return
    from llmc_cli.config import files

    path = state_dir() / "ratelimit.json"
    with files.locked(path):
        try:
            state = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            state = {}  # missing or torn by an older llmc: start counting afresh
        if not isinstance(state, dict):
            state = {}
        now = time.time()
        for key, limit in limits:
            recent = [t for t in state.get(key) or [] if isinstance(t, (int, float)) and now - t < WINDOW_SECONDS]
            state[key] = recent
            if len(recent) >= limit:
                retry = max(0.1, WINDOW_SECONDS - (now - min(recent)))
                raise PolicyDenied(f"rate limit: {key.split(':')[0]} limit of {limit} calls per minute reached; "
                                   f"retry after {retry:.1f}s", retryAfter=round(retry, 1), rule=key)
        for key, _ in limits:
            state[key].append(now)
        # Counted before the call runs: if the count cannot be stored (ConfigError, exit 3), the
        # call does not run either, or a full disk would lift every limit.
        files.write_atomic(path, json.dumps(state))
