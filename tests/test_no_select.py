"""No wait on a descriptor goes through select(2): it cannot watch a descriptor numbered 1024 or
more (FD_SETSIZE), which a process holding many (the gateway's connections, a host's servers)
hands to its next pipe; select.select then raises "filedescriptor out of range in select()".
Every wait is poll(2)'s (tests/mcp/test_stdio.py has the case of a stdio server's pipe)."""

from __future__ import annotations

import ast
from pathlib import Path

import llmc_cli

PACKAGE = Path(llmc_cli.__file__).parent


def test_no_module_waits_with_select_select() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Attribute) and node.attr == "select" and isinstance(node.value, ast.Name):
                if node.value.id == "select":
                    found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
            elif isinstance(node, ast.ImportFrom) and node.module == "select" and any(a.name == "select" for a in node.names):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert found == [], "wait with select.poll(), not select.select()"
