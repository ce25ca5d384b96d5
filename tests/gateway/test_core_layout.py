"""The gateway's own modules depend on each other in one direction (imports of every kind:
at the top, inside functions, for type checking only), and stay small: no module over 400 lines,
no class with more than 15 methods."""

from __future__ import annotations

import ast
from pathlib import Path

GATEWAY = Path(__file__).resolve().parents[2] / "llmc_cli" / "gateway"
PREFIX = "llmc_cli.gateway."


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith(PREFIX):
                out.add(node.module.removeprefix(PREFIX).split(".")[0])
            elif node.module == "llmc_cli.gateway":
                out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name.removeprefix(PREFIX) for a in node.names if a.name.startswith(PREFIX))
    return out - {path.stem}


def test_the_gateway_modules_import_each_other_in_one_direction() -> None:
    graph = {path.stem: _imports(path) for path in GATEWAY.glob("*.py")}
    cycles = []

    def visit(module: str, trail: list[str]) -> None:
        for used in sorted(graph.get(module, ())):
            if used in trail:
                cycles.append([*trail[trail.index(used) :], used])
            elif len(trail) < len(graph):
                visit(used, [*trail, used])

    for module in graph:
        visit(module, [module])
    assert cycles == []


def test_modules_and_classes_stay_small() -> None:
    long = {p.name: n for p in GATEWAY.glob("*.py") if (n := len(p.read_text().splitlines())) > 400}
    assert long == {}
    big = {
        f"{path.name}:{node.name}": methods
        for path in GATEWAY.glob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef)
        and (methods := sum(isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) for item in node.body)) > 15
    }
    assert big == {}
