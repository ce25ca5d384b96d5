"""The names a host sees for a toolbox's tools and prompts (`[serve] name_separator`), and the
way back from each to exactly one (server, name).

"." (the default) names them `SERVER.NAME` as the MCP spec allows: server names contain no dot,
so the first dot splits a name back and nothing is kept. Hosts that hand tool names straight to a
model provider (mcp-use's adapters, fast-agent, Claude Desktop, Claude Code, Cursor, VS Code,
Windsurf) need `^[a-zA-Z0-9_-]{1,64}$`: with "__" (`SERVER__NAME`, the `mcp__server__tool`
style) or "_" the names are made provider-safe by translate/names.py, the same mapper `llmc ask`
and `tools export` use: characters a provider refuses become `_`, and a name too long, or one two
servers' names would share (`a__b` + `c` and `a` + `b__c`), gets `_` and a short hash of its
(server, name) pair, so the result depends on the names alone, never on listing order. Each
renaming is said once on stderr. A name once given stays its pair's while the gateway runs (hosts
of different clearances list different sets; a pair that comes later and wants a name already
given takes a hash suffix instead), and the dotted spelling `SERVER.NAME` is always understood
too (pinned globs, llmc.call_tool).

Resource URIs are not names a host gives a model: they keep `SERVER.URI` under every separator,
so a URI a host builds from a template routes back whatever the server names contain.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Collection, Iterable

from llmc_cli.catalog import routing
from llmc_cli.model import clean_line
from llmc_cli.translate.names import RULES, NameMap, assign, with_suffix

SEPARATORS = (".", "__", "_")
META_SERVER = "llmc"  # the gateway's own tools under tool search: llmc.search_tools, llmc.call_tool
PROVIDER_RULES = "openai"  # ^[a-zA-Z0-9_-]{1,64}$, which Anthropic documents too


def _say(message: str) -> None:
    print(f"llmc serve: {clean_line(message)}", file=sys.stderr, flush=True)  # a server's tool name: one line, no escapes


class ServedNames:
    """One toolbox's naming: `name(kind, server, name)` out, `route(kind, exposed)` back."""

    def __init__(self, separator: str, servers: Collection[str], bare: str | None = None, say: Callable[[str], None] = _say):
        self.separator = separator
        self.servers = servers  # the profile's server names (what a dotted name may start with)
        self.bare = bare  # the one server of `bare_names`: names as that server gives them
        self.say = say
        self._lock = threading.Lock()
        self._assigned: dict[str, tuple[frozenset[tuple[str, str]], NameMap]] = {}  # kind -> (owners, names)
        self._routes: dict[str, dict[str, tuple[str, str]]] = {}  # kind -> every name given -> owner
        self._given: dict[str, dict[tuple[str, str], str]] = {}  # kind -> owner -> the one name it was given

    @property
    def dotted(self) -> bool:
        """Names as the spec allows them (no map: joined and split as they are)."""
        return self.separator == "."

    def join(self, server: str, name: str) -> str:
        """The name before any provider rule: `SERVER<sep>NAME`, or the bare name."""
        return name if self.bare else f"{server}{self.separator}{name}"

    def meta(self, name: str) -> str:
        """One of the gateway's own tools (`search_tools`, `call_tool`) under this separator."""
        return f"{META_SERVER}.{name}" if self.dotted else f"{META_SERVER}{self.separator}{name}"

    def assign(self, kind: str, owners: Iterable[tuple[str, str]], reserved: Collection[str] = ()) -> NameMap | None:
        """The names of these (server, name) pairs (None: dotted, nothing to map). Computed again
        only when the set changes; `reserved`: names no pair may take (the meta-tools').

        Hosts list different sets (a clearance sees fewer servers; an upstream is down for a
        while; a server's list changes), and a clash moves a name only when both owners are in
        the set. So a name, once given, stays its owner's for the gateway's life, and a pair
        not named yet takes its set's name only if no other pair was ever given it (else a hash
        suffix): one host's listing never reroutes another host's name to a different tool."""
        if self.dotted:
            return None
        wanted = frozenset(owners)
        with self._lock:
            held = self._assigned.get(kind)
            if held is not None and held[0] == wanted:
                return held[1]
        ordered = sorted(wanted)
        proposed, _findings = assign(ordered, PROVIDER_RULES, kind, {o: self.join(*o) for o in ordered})
        with self._lock:
            given = self._given.setdefault(kind, {})
            routes = self._routes.setdefault(kind, {})
            fresh = [o for o in ordered if o not in given]
            for owner in fresh:
                given[owner] = name = _free(proposed.provider_name(*owner), owner, routes, reserved)
                routes[name] = owner
            names = NameMap((given[o], o) for o in ordered)
            self._assigned[kind] = (wanted, names)
            said = [(o, given[o]) for o in fresh if given[o] != self.join(*o)]
        rule = RULES[PROVIDER_RULES]
        for (server, name), exposed in said:
            joined = self.join(server, name)
            if not rule.legal(joined):
                reason = f"a model provider needs {rule.pattern.pattern}"
            elif joined in reserved:
                reason = f"{joined!r} is the gateway's own tool"
            else:
                reason = f"another {kind} would be named {joined!r} too"
            self.say(f"{kind} {server}.{name} is served as {exposed!r}: {reason}")
        return names

    def name(self, kind: str, server: str, name: str) -> str:
        """The name a host sees for one server's tool or prompt (assign() first for the map)."""
        with self._lock:
            given = self._given.get(kind, {}).get((server, name))
        return given if given is not None else self.join(server, name)

    def route(self, kind: str, exposed: str) -> tuple[str, str] | None:
        """A name a host sent -> (server, name): a name this gateway gave, or the dotted spelling
        `SERVER.NAME`, or (bare names) the server's own name; None for anything else."""
        if not self.dotted:
            with self._lock:
                owner = self._routes.get(kind, {}).get(exposed)
            if owner is not None:
                return owner
        if self.bare:
            return (self.bare, exposed) if exposed else None
        named = routing.qualified(exposed, self.servers)
        return named if named is not None and named[1] else None

    def known(self, kind: str, exposed: str) -> bool:
        """Whether a name was given (a miss makes the caller list again before it gives up)."""
        with self._lock:
            return exposed in self._routes.get(kind, {})


def _free(name: str, owner: tuple[str, str], given: dict[str, tuple[str, str]], reserved: Collection[str]) -> str:
    """`name` for `owner`, or with a hash suffix of the owner when another owner was given it
    already or it is reserved (a wider suffix in the astronomically rare case that clashes too)."""
    for size in (8, 16, 64):
        if given.get(name, owner) == owner and name not in reserved:
            return name
        name = with_suffix(name, f"{owner[0]}\x00{owner[1]}", 64, size)
    return name
