"""Many servers, one toolbox: sessions opened concurrently and lazily, tools namespaced by server,
bare tool names routed when unambiguous. A dead server never blocks the others.

shared.py: Catalog, the one object a command (or a gateway host) holds, and which connection
serves each server when hosts share them; pool.py: one catalog's own connections (connect,
restart, release, warm-up, close); listing.py: tool listings and work fanned out to every server;
routing.py: tool names to servers. Importing the package loads none of them: routing.py alone is
light (shell completion and services/tools.py import it), the others load the MCP client."""

from typing import TYPE_CHECKING

from llmc_cli import lazy_names

_WHERE = {
    "Catalog": "llmc_cli.catalog.shared",
    "ConnectOptions": "llmc_cli.catalog.pool",
    "ServerFailure": "llmc_cli.catalog.listing",
}

if TYPE_CHECKING:  # what mypy reads; at run time each name loads with its module, on first use
    from llmc_cli.catalog.listing import ServerFailure
    from llmc_cli.catalog.pool import ConnectOptions
    from llmc_cli.catalog.shared import Catalog
else:
    __getattr__ = lazy_names(__name__, globals(), _WHERE)

__all__ = ["Catalog", "ConnectOptions", "ServerFailure"]
