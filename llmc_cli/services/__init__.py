"""Use cases shared by every command. The pipeline (pipeline.py: Pipeline.run) is the ONLY path
that runs a tool, reads a resource or gets a prompt: a caller gets one from open_calls (a command)
or host_calls (the gateway), hands it a ToolRequest or a Read and renders the Outcome.

pipeline.py: the entry and its stages (resolve, validate, authorize, limit, lookup, run, inspect,
record; request.py: ToolRequest and Outcome); inspect.py: the inspect stage's inspectors;
invocation.py: who runs the calls (Invocation, Conclusions); calls.py: the parts of a call
(authorize, record_decisions, the open-call registry that interruptions close, the cache entry);
reads.py: one read (Read, authorize_read, read_decision); catalogs.py: the servers a command talks to
and the tools, resources and prompts a profile sees; batch.py: many calls in one run; search.py:
tool search; caching.py: which calls [cache] answers, and their keys; state.py: the one choice of
files or PostgreSQL (open_state), and the audit chain and host sessions over it; tools.py: tool
names to servers for the commands a person types (ToolResolver; its cache feeds shell completion).
The names below are the package's interface.
"""

from typing import TYPE_CHECKING

from llmc_cli import lazy_names

# Which module holds each name of the interface.
_WHERE = {
    name: module
    for module, names in {
        "llmc_cli.services.batch": "Batch BatchItem run_batch",
        "llmc_cli.services.calls": "OPEN_CALLS OpenCalls",
        "llmc_cli.services.inspect": "Inspection Inspector inspectors_for",
        "llmc_cli.services.pipeline": "Outcome Pipeline ToolRequest host_calls open_calls",
        "llmc_cli.services.reads": "Read authorize_read read_decision server_tools",
        "llmc_cli.services.sandbox": "Launched launch protect protected_paths launch_specs",
        "llmc_cli.services.catalogs": (
            "READ_KINDS builtin_servers open_catalog server_reach usable_servers visible_items visible_offered visible_tools"
        ),
        "llmc_cli.services.scanning": "scan_servers",
        "llmc_cli.services.search": "Match ToolIndex searchable_tools",
        "llmc_cli.services.semantic": "search_index semantic_wanted",
        "llmc_cli.services.state": "audit_log host_sessions open_state",
        "llmc_cli.services.tools": "ToolResolver",
    }.items()
    for name in names.split()
}

if TYPE_CHECKING:  # what mypy reads; at run time each name loads with its module, on first use
    from llmc_cli.services.batch import Batch, BatchItem, run_batch
    from llmc_cli.services.calls import OPEN_CALLS, OpenCalls
    from llmc_cli.services.catalogs import (
        READ_KINDS,
        builtin_servers,
        open_catalog,
        server_reach,
        usable_servers,
        visible_items,
        visible_offered,
        visible_tools,
    )
    from llmc_cli.services.inspect import Inspection, Inspector, inspectors_for
    from llmc_cli.services.pipeline import Outcome, Pipeline, ToolRequest, host_calls, open_calls
    from llmc_cli.services.reads import Read, authorize_read, read_decision, server_tools
    from llmc_cli.services.sandbox import Launched, launch, launch_specs, protect, protected_paths
    from llmc_cli.services.scanning import scan_servers
    from llmc_cli.services.search import Match, ToolIndex, searchable_tools
    from llmc_cli.services.semantic import search_index, semantic_wanted
    from llmc_cli.services.state import audit_log, host_sessions, open_state
    from llmc_cli.services.tools import ToolResolver
else:
    __getattr__ = lazy_names(__name__, globals(), _WHERE)


__all__ = [
    "Batch",
    "BatchItem",
    "run_batch",
    "OPEN_CALLS",
    "OpenCalls",
    "Inspection",
    "Inspector",
    "inspectors_for",
    "Outcome",
    "Pipeline",
    "ToolRequest",
    "host_calls",
    "open_calls",
    "Read",
    "authorize_read",
    "read_decision",
    "server_tools",
    "READ_KINDS",
    "builtin_servers",
    "open_catalog",
    "server_reach",
    "protect",
    "protected_paths",
    "launch_specs",
    "Launched",
    "launch",
    "visible_items",
    "visible_offered",
    "usable_servers",
    "visible_tools",
    "scan_servers",
    "Match",
    "ToolIndex",
    "searchable_tools",
    "search_index",
    "semantic_wanted",
    "audit_log",
    "host_sessions",
    "open_state",
    "ToolResolver",
]
