"""The scan of server metadata (guard/scan.py) over a catalog: every tool a server offers (the
policy's verdict aside: a denied tool's text is still the server's text), and its instructions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llmc_cli.errors import LlmcError
from llmc_cli.guard import scan
from llmc_cli.guard.scan import MetaFinding
from llmc_cli.services.catalogs import cleared_servers

if TYPE_CHECKING:
    from llmc_cli.catalog import Catalog
    from llmc_cli.config.profiles import LoadedProfile


def scan_servers(
    catalog: Catalog, profile: LoadedProfile, servers: list[str] | None = None, clearance: str | None = None
) -> tuple[list[MetaFinding], list[Any]]:
    """(findings, failures): the metadata scan of these servers (None: all the catalog's that
    `clearance` covers), the cross-server rules judged among them; servers that could not be
    listed are failures."""
    names = cleared_servers(catalog, profile, servers, clearance)
    if names == []:
        return [], []
    tools, failures = catalog.list_tools(names)
    listed = [s for s in (names or list(catalog.specs)) if s not in {f.server for f in failures}]
    per_server = {s: [t for t in tools if t.server == s] for s in listed}
    instructions = {s: _instructions(catalog, s) for s in listed}
    return scan.scan(per_server, instructions), failures


def _instructions(catalog: Catalog, server: str) -> str | None:
    """A server's instructions. A modern server whose era was known from an earlier run was not
    asked server/discover (its instructions come with that answer): it is asked now."""
    session = catalog.session(server)
    if session.instructions is None and session.era == "modern" and session.protocol_version:
        try:
            session.discover(session.protocol_version)
        except LlmcError:
            return None
    return session.instructions
