"""Thin Click commands: parse, one core call, render, translate errors. The only users of click.

The names below are the package's interface: what a server-facing command needs once its servers
have started (cli/common.py: the catalog over them, the client hooks, the pipeline), loaded when
first used. A command names them as `cli.open_target`, so its stdio server spawns
(cli/starting.py start_servers) before common's modules load and its own start-up overlaps
llmc's (`call`, `call --batch`; `tools list` loads its listing after the spawn likewise)."""

from typing import TYPE_CHECKING

from llmc_cli import lazy_names
from llmc_cli.cli.lazy_stdlib import install

install()  # before click is imported: see lazy_stdlib.py

__getattr__ = lazy_names(
    __name__,
    globals(),
    {
        **dict.fromkeys(("open_target", "command_calls", "start_telemetry", "warnings"), "llmc_cli.cli.common"),
        # the questions a person answers on the terminal: only where one can (cli/common.py)
        **dict.fromkeys(("confirm_call", "elicit"), "llmc_cli.cli.prompt"),
    },
)

if TYPE_CHECKING:  # what mypy reads; at run time each name loads with its module, on first use
    from llmc_cli.cli.common import command_calls, open_target, start_telemetry, warnings
    from llmc_cli.cli.prompt import confirm_call, elicit

__all__ = ["command_calls", "confirm_call", "elicit", "open_target", "start_telemetry", "warnings"]
