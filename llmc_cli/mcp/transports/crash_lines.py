"""Which of a crashed server's stderr lines says what went wrong. A process's last line is
seldom its error: Node ends with "Node.js v20.20.2" after the stack, npm with where its log is,
Python with the exception after the traceback. Used by the stdio transport's error (so the CLI
and the gateway's log say the same thing)."""

from __future__ import annotations

import re

from llmc_cli import lazy_pattern

# An error at the start of a line: `Error: ...`, `ModuleNotFoundError: ...`, `error: ...`,
# `fatal: ...`, `panic: ...`, `prog: error: ...` (argparse), `[ERROR] ...`.
# Compiled on first use (a crash): ~1.2 ms of every start-up otherwise.
_ERROR = lazy_pattern(
    r"^(?:\S+: )?(?:[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)|error|fatal|panic|critical)\b[^:]{0,40}:\s*\S"
    r"|^\[?(?:ERROR|FATAL|CRITICAL)\]?[\s:]",
    re.IGNORECASE,
)
# Lines that are never the reason: runtime versions, npm's log location, stack frames, braces.
_NOISE = lazy_pattern(
    r"^(?:Node\.js v\d|Bun v\d|npm (?:error|ERR!) (?:A complete log|code\b|\s*$)|\s+at |[{}\[\]^]\s*$|throw \w+;|\s*$)"
)
_NPM = lazy_pattern(r"^npm (?:error|ERR!) ")


def telling_line(lines: list[str]) -> str | None:
    """The line of a crashed process's stderr that says what went wrong: the last error line
    (`Error: Cannot find module ...`, a traceback's exception), else npm's first error, else
    the last line that is not noise, else the last line (None: no output)."""
    kept = [line.rstrip() for line in lines if line.strip()]
    if not kept:
        return None
    for line in reversed(kept):
        if _ERROR.match(line) and not _NPM.match(line):
            return line
    npm = [line for line in kept if _NPM.match(line) and not _NOISE.match(line)]
    if npm:
        return npm[0]
    for line in reversed(kept):
        if not _NOISE.match(line):
            return line
    return kept[-1]
