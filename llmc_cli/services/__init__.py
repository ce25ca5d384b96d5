"""Use cases shared by every command. `call_tool` is the ONLY path that runs a tool.

calls.py: one call (Invocation, authorize, record_decisions, call_tool, the open-call registry
that interruptions close); catalogs.py: the servers a command talks to and the tools a profile
sees; batch.py: many calls in one run. The names below are the package's interface.
"""

from llmc_cli.services.batch import BatchItem, run_batch
from llmc_cli.services.calls import (OPEN_CALLS, Authorization, Invocation, OpenCalls, authorize, call_tool,
                                     lock_path, record_decisions)
from llmc_cli.services.catalogs import (builtin_servers, host_sessions, open_catalog, protect, protected_paths,
                                        server_specs, visible_tools)

__all__ = ["BatchItem", "run_batch", "OPEN_CALLS", "Authorization", "Invocation", "OpenCalls", "authorize",
           "call_tool", "lock_path", "record_decisions", "builtin_servers", "host_sessions", "open_catalog",
           "protect", "protected_paths", "server_specs", "visible_tools"]
