"""llmc's built-in MCP servers. `workspace` is the zero-setup default (run in-process).

The process table (processes.py) and the regex worker (regex_worker.py), which import subprocess
and signal, load with the first process or regex search a workspace starts, not with the server:
a listing or a file tool never needs them."""

from typing import TYPE_CHECKING

from llmc_cli import lazy_names

_WHERE = {
    "ProcessTable": "llmc_cli.server.processes",
    "RegexWorker": "llmc_cli.server.regex_worker",
    "Protected": "llmc_cli.server.jail",  # a sandboxed launch's hidden names (services/sandbox.py)
    # bubblewrap: a sandboxed launch's (services/sandbox.py), not an unsandboxed server's
    **dict.fromkeys(
        ("FIXED_PATH", "SYSTEM_DIRS", "bwrap_argv", "bwrap_usable", "find_bwrap", "is_under", "limited"),
        "llmc_cli.server.sandbox",
    ),
}

if TYPE_CHECKING:  # what mypy reads; at run time the name loads with its module, on first use
    from llmc_cli.server.jail import Protected
    from llmc_cli.server.processes import ProcessTable
    from llmc_cli.server.regex_worker import RegexWorker
    from llmc_cli.server.sandbox import FIXED_PATH, SYSTEM_DIRS, bwrap_argv, bwrap_usable, find_bwrap, is_under, limited
else:
    __getattr__ = lazy_names(__name__, globals(), _WHERE)

__all__ = [
    "FIXED_PATH",
    "SYSTEM_DIRS",
    "ProcessTable",
    "Protected",
    "RegexWorker",
    "bwrap_argv",
    "bwrap_usable",
    "find_bwrap",
    "is_under",
    "limited",
]
