"""The session keeper (`llmc session start`): a background process that holds MCP servers between
llmc invocations.

daemon.py     the keeper process itself (`python -P -m llmc_cli.keeper.daemon`)
upstream.py   what it holds: the servers (Upstream) and the callers attached to them (Client)
lifecycle.py  start, find, inspect and stop keepers from a command
roster.py     a session's socket and the servers it holds (all a call through a keeper needs)
transport.py  the wire to a keeper: a Transport for sessions with the servers it holds, and attach()

Nothing here is imported at start-up; each command imports the module it needs, or uses the
names below (the package's lazy interface: each loads its module with the first one used).
"""

from typing import TYPE_CHECKING

from llmc_cli import lazy_names

_WHERE = {
    "held_specs": "llmc_cli.keeper.lifecycle",
    "socket_path": "llmc_cli.keeper.roster",
    "specs_of": "llmc_cli.keeper.roster",
}

if TYPE_CHECKING:
    from llmc_cli.keeper.lifecycle import held_specs
    from llmc_cli.keeper.roster import socket_path, specs_of
else:
    __getattr__ = lazy_names(__name__, globals(), _WHERE)

__all__ = ["held_specs", "socket_path", "specs_of"]
