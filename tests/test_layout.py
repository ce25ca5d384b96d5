"""The layout rules of DESIGN.md, checked by parsing every module's imports (nothing is imported).

Direction: cli -> (agent, gateway) -> services -> (catalog, policy, audit, store, config,
telemetry) -> mcp -> (errors, model), and agent -> providers -> translate -> model.

- DESIGN_LAYERS and DESIGN_CHAIN below are those arrows; ALLOWED must agree with them.
- ALLOWED says which component may import which. It applies to every import, module-level
  or inside a function: a lazy import is about start-up time, not a licence to reach upwards.
- Module-level imports form no cycle (imports inside functions may close one: that is how a
  module reaches a sibling it must not load at start-up, and Python resolves it at call time).
- click is imported only under llmc_cli/cli/.

A new component (a new top-level module or package) fails here until it is given its place.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "llmc_cli"

# component -> the components it may import (besides itself). The middle layer (config, store,
# policy, audit, lockfile, keeper, catalog) may use the protocol package below it. "llmc_cli" is
# the package root (__version__, lazy_names). Components are top-level modules and packages, except the
# keeper's process (keeper/daemon.py, keeper/upstream.py): a program at the level of the gateway
# (it starts the built-in servers through services).
ALLOWED: dict[str, set[str]] = {
    "llmc_cli": set(),
    "errors": set(),
    "lean": set(),  # the stdlib's dataclass and SHA-256 without their start-up cost; model.py re-exports them
    "model": {"lean"},
    "jsonish": set(),  # the tolerant JSON tokeniser under config's JSONC reader and the text provider
    "interrupts": {"errors"},  # SIGINT/SIGTERM/SIGHUP as one Interrupted, asked by audit and services
    "mcp": {"llmc_cli", "errors", "model"},
    "translate": {"errors", "model"},
    "providers": {"translate", "jsonish", "errors", "model"},
    "config": {"llmc_cli", "jsonish", "mcp", "errors", "model"},  # llmc_cli: lazy_names (config/__init__.py)
    "store": {"config", "mcp", "errors", "model"},
    "policy": {"llmc_cli", "config", "store", "mcp", "errors", "model"},
    "audit": {"llmc_cli", "config", "store", "interrupts", "telemetry", "mcp", "errors", "model"},
    "lockfile": {"config", "translate", "mcp", "errors", "model"},
    "server": {"llmc_cli", "config", "telemetry", "interrupts", "mcp", "errors", "model"},  # the built-in MCP servers
    "keeper": {"llmc_cli", "config", "store", "mcp", "errors", "model"},  # llmc_cli: lazy_names  # lifecycle.py, transport.py
    "catalog": {"llmc_cli", "keeper", "interrupts", "mcp", "errors", "model"},
    "telemetry": {"llmc_cli", "config", "mcp", "errors", "model"},  # imported by what it observes
    # what is inspected on the way (DLP, clearance, the metadata scan): a stage, not a caller
    "guard": {"config", "errors", "model"},
    "services": {
        "llmc_cli",
        "guard",
        "catalog",
        "policy",
        "audit",
        "store",
        "config",
        "keeper",
        "lockfile",
        "server",
        "interrupts",
        "telemetry",
        "mcp",
        "errors",
        "model",
    },
    "keeper.process": {"keeper", "services", "store", "config", "interrupts", "mcp", "errors", "model"},
    "agent": {
        "services",
        "guard",
        "catalog",
        "policy",
        "audit",
        "providers",
        "translate",
        "config",
        "telemetry",
        "interrupts",
        "mcp",
        "errors",
        "model",
    },
    "gateway": {
        "llmc_cli",
        "guard",
        "translate",  # names.py: the provider-safe name mapper `ask` and `tools export` use
        "telemetry",
        "services",
        "catalog",
        "policy",
        "audit",
        "store",
        "lockfile",
        "server",
        "config",
        "interrupts",
        "mcp",
        "errors",
        "model",
    },
    "cli": {
        "llmc_cli",
        "guard",
        "agent",
        "gateway",
        "services",
        "telemetry",
        "catalog",
        "policy",
        "audit",
        "store",
        "config",
        "keeper",
        "lockfile",
        "server",
        "translate",
        "providers",
        "interrupts",
        "mcp",
        "errors",
        "model",
    },
    "__main__": {"cli"},
}


# DESIGN.md's arrows, `cli -> (agent, gateway) -> services -> (catalog, policy, audit, store,
# config, telemetry) -> mcp -> (errors, model)`, as layers from the top: ALLOWED may point only
# down, never up, and sideways only inside the middle layer (agent and gateway each get call_tool
# from services, not from each other). Beside them `agent -> providers -> translate -> model`.
# Components DESIGN does not name (keeper, server, lockfile, interrupts) are placed by ALLOWED alone.
DESIGN_LAYERS: list[set[str]] = [
    {"cli"},
    {"agent", "gateway"},
    {"services"},
    {"catalog", "policy", "audit", "store", "config", "telemetry", "guard"},
    {"mcp"},
    {"errors", "model"},
]
SIDEWAYS_ALLOWED = DESIGN_LAYERS[3]
DESIGN_CHAIN = ["agent", "providers", "translate", "model"]


@dataclass(frozen=True)
class Import:
    source: str  # importing module, dotted
    target: str  # imported module (or the package, for a name that is not a module)
    line: int
    lazy: bool  # inside a function


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def component(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "llmc_cli"
    if parts[1] == "keeper" and parts[2:3] in (["daemon"], ["upstream"]):
        return "keeper.process"
    return parts[1]


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(module: str) -> list[Import]:
    """Every import statement of a module; those under `if TYPE_CHECKING:` are left out (they
    never run)."""
    path = MODULES[module]
    is_package = path.name == "__init__.py"
    found: list[Import] = []

    def visit(node: ast.AST, lazy: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for other in child.orelse:
                    visit(other, lazy)
                continue
            if isinstance(child, ast.Import):
                found.extend(Import(module, a.name, child.lineno, lazy) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = module.split(".")[: len(module.split(".")) - child.level + (1 if is_package else 0)]
                    base = ".".join(anchor + ([child.module] if child.module else []))
                for alias in child.names:
                    full = f"{base}.{alias.name}"
                    found.append(Import(module, full if full in MODULES else base, child.lineno, lazy))
            visit(child, lazy or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(ast.parse(path.read_text(encoding="utf-8"), str(path)), False)
    return found


ALL_IMPORTS = [imp for module in MODULES for imp in imports_of(module)]
INTERNAL = [imp for imp in ALL_IMPORTS if imp.target.split(".")[0] == "llmc_cli"]


def where(imp: Import) -> str:
    return f"{MODULES[imp.source].relative_to(PACKAGE.parent)}:{imp.line} imports {imp.target}"


def test_every_component_has_a_place() -> None:
    unknown = sorted({component(m) for m in MODULES} - set(ALLOWED))
    assert not unknown, f"give these components a place in ALLOWED (and in README's layout): {unknown}"


def test_the_allowed_directions_form_no_cycle() -> None:
    """ALLOWED itself is a direction: no component may reach itself through others."""

    def reach(start: str) -> set[str]:
        seen, todo = set(), list(ALLOWED[start])
        while todo:
            name = todo.pop()
            if name not in seen:
                seen.add(name)
                todo.extend(ALLOWED.get(name, ()))
        return seen

    assert [name for name in ALLOWED if name in reach(name)] == []


@pytest.mark.parametrize("name", sorted(ALLOWED))
def test_imports_follow_the_direction(name: str) -> None:
    wrong = [
        where(imp) + (" (inside a function)" if imp.lazy else "")
        for imp in INTERNAL
        if component(imp.source) == name and component(imp.target) not in ALLOWED[name] | {name}
    ]
    assert wrong == [], f"{name} may import only {sorted(ALLOWED[name])}"


def test_allowed_follows_the_arrows_of_design_md() -> None:
    layer = {name: i for i, names in enumerate(DESIGN_LAYERS) for name in names}
    against = [
        f"{source} -> {target}"
        for source, targets in ALLOWED.items()
        for target in targets
        if source in layer
        and target in layer
        and (layer[target] < layer[source] or (layer[target] == layer[source] and source not in SIDEWAYS_ALLOWED))
    ]
    chain = {name: i for i, name in enumerate(DESIGN_CHAIN)}
    against += [
        f"{source} -> {target}"
        for source, targets in ALLOWED.items()
        for target in targets
        if source in chain and target in chain and chain[target] < chain[source]
    ]
    assert against == [], "ALLOWED points against DESIGN.md's arrows (change DESIGN.md first, and say why)"
    assert set(layer) | set(chain) <= set(ALLOWED), "DESIGN.md names a component ALLOWED does not know"


def test_the_protocol_package_depends_on_errors_and_model_only() -> None:
    """Spelled out on its own: the rule that keeps mcp/ a library (no config, no files)."""
    wrong = [
        where(imp)
        for imp in INTERNAL
        if component(imp.source) == "mcp" and component(imp.target) not in {"mcp", "errors", "model", "llmc_cli"}
    ]
    assert wrong == []


def test_click_only_under_cli() -> None:
    wrong = [where(imp) for imp in ALL_IMPORTS if imp.target.split(".")[0] == "click" and component(imp.source) != "cli"]
    assert wrong == []


def test_no_import_cycles_at_module_level() -> None:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for imp in INTERNAL:
        if not imp.lazy and imp.target in MODULES and imp.target != imp.source:
            graph[imp.source].add(imp.target)
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)
    assert cycles == [], "module-level import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_the_parser_sees_the_imports() -> None:
    """Guards the test itself: a parser that found nothing would pass every rule above."""
    pairs = {(imp.source, imp.target) for imp in INTERNAL}
    assert ("llmc_cli.catalog.pool", "llmc_cli.mcp.client") in pairs
    assert any(imp.lazy and imp.source.startswith("llmc_cli.services") for imp in INTERNAL)
    assert any(imp.target.split(".")[0] == "click" for imp in ALL_IMPORTS)


# One name, one definition: a top-level function or class name is defined in one module only,
# so a name read anywhere (a traceback, a grep, an import) says which thing it is.
# Allowed in several modules, because a protocol names them:
ONE_NAME_PROTOCOL = {
    "main",  # a module's entry point: cli/main.py (the `llmc` script), keeper/daemon.py (`python -m`)
    "definition",
    "document",  # what translate/__init__.py calls on each tool-format module
    "__getattr__",
    "__dir__",  # PEP 562: a package's lazy names
}
# Defined twice today and to be renamed: this list only shrinks (a name leaves it when it is
# renamed; the test fails if a name here is no longer defined twice, so it cannot go stale).
ONE_NAME_DEBT = {
    # "document": cli/output_schemas.py's is not translate's protocol function
    "Client",
    "check",
    "deferred",
    "describe",
    "document",
    "error",
    "from_json",
    "install",
    "lines",
    "listing",
    "log",
    "prepare",
    "protected_paths",
    "read",
    "read_line",
    "run",
    "summary",
    "write",
}


def _is_click_command(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> bool:
    """A Click command's function is named after its command (`llmc servers list` -> list_)."""
    for decorator in node.decorator_list:
        func = decorator.func if isinstance(decorator, ast.Call) else decorator
        if isinstance(func, ast.Attribute) and func.attr in ("command", "group"):
            return True
    return False


def top_level_definitions() -> dict[str, list[str]]:
    """Function and class name -> the modules that define it at the top level (Click commands aside)."""
    found: dict[str, list[str]] = {}
    for module, path in MODULES.items():
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not _is_click_command(node):
                found.setdefault(node.name, []).append(module)
    return found


def test_a_top_level_name_is_defined_in_one_module() -> None:
    twice = {name: modules for name, modules in top_level_definitions().items() if len(set(modules)) > 1}
    new = {name: modules for name, modules in twice.items() if name not in ONE_NAME_PROTOCOL | ONE_NAME_DEBT}
    assert new == {}, "give each its own name (or one definition, imported where needed)"
    assert sorted(ONE_NAME_DEBT - set(twice)) == [], "renamed: take these off ONE_NAME_DEBT"
    assert sorted(twice["main"]) == ["llmc_cli.cli.main", "llmc_cli.keeper.daemon"]  # guards the parser


# Modules that may open a file for writing by name: config/files.py holds open_own, THE opener of
# llmc's own files (no link followed, the parent checked); the workspace server's jail opens the
# model's files in the user's workspace through its own O_NOFOLLOW openers (server/jail.py).
WRITE_OPENERS = {"config/files.py", "server/jail.py"}
_WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC"}
_WRITING_METHODS = {"write_text", "write_bytes", "mkstemp", "mkdtemp", "NamedTemporaryFile", "mkfifo", "symlink_to"}


def _mode_writes(mode: ast.expr | None, default: bool) -> bool:
    if mode is None:
        return default
    if isinstance(mode, ast.Constant) and isinstance(mode.value, str):
        return bool(set(mode.value) & set("wax+"))
    return True  # a mode computed at run time: counted as writing


def _opens_for_writing(call: ast.Call) -> bool:
    """open(NAME, "w"/"a"/"x"/"+..."), PATH.open("w"...), os.open(NAME, O_WRONLY|O_CREAT|...) (not
    os.devnull), Path.write_text/write_bytes, tempfile.mkstemp and the like."""
    func = call.func
    mode = next((k.value for k in call.keywords if k.arg == "mode"), None)
    if isinstance(func, ast.Name) and func.id == "open":
        return _mode_writes(mode or (call.args[1] if len(call.args) > 1 else None), False)
    if not isinstance(func, ast.Attribute):
        return False
    if func.attr == "open" and isinstance(func.value, ast.Name) and func.value.id == "os":
        target = ast.unparse(call.args[0]) if call.args else ""
        flags = {n.attr for n in ast.walk(call.args[1]) if isinstance(n, ast.Attribute)} if len(call.args) > 1 else set()
        return target != "os.devnull" and bool(flags & _WRITE_FLAGS)
    if func.attr == "open":  # Path.open(mode): only a literal mode string counts (other .open()s are not files)
        first = mode or (call.args[0] if call.args else None)
        return isinstance(first, ast.Constant) and isinstance(first.value, str) and _mode_writes(first, False)
    if isinstance(func.value, ast.Name) and func.value.id == "formatter":  # click's HelpFormatter, not a file
        return False
    return func.attr in _WRITING_METHODS


def test_llmc_opens_its_files_for_writing_through_one_helper() -> None:
    """A file llmc writes is opened by config.files.open_own (or write_atomic, locked, file_lock
    over it), which follows no link it did not make: a plain open() elsewhere could append to
    whatever a server put in the file's place (issue 35: llmc writes its own files through paths
    a sandboxed server controls)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative in WRITE_OPENERS:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and _opens_for_writing(node):
                found.append(f"{relative}:{node.lineno}: {ast.unparse(node)[:80]}")
    assert not found, "open files llmc writes with config.files.open_own:\n" + "\n".join(found)


def test_the_writing_open_detector_sees_each_form() -> None:
    def calls(source: str) -> list[bool]:
        return [
            _opens_for_writing(n)
            for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.Call) and not (isinstance(n.func, ast.Name) and n.func.id in ("print",))
        ]

    assert calls("open(p, 'a')") == [True]
    assert calls("open(p)") == [False]
    assert calls("open(p, 'rb')") == [False]
    assert calls("open(p, mode)") == [True]
    assert calls("os.open(p, os.O_WRONLY | os.O_APPEND)") == [True]
    assert calls("os.open(p, os.O_RDONLY)") == [False]
    assert calls("os.open(os.devnull, os.O_RDWR)") == [False]
    assert calls("path.open('w')") == [True]
    assert calls("inflight.open(request_id, timed=False)") == [False]
    assert calls("path.write_text('x')") == [True]
    assert calls("tempfile.mkstemp(dir=d)") == [True]
