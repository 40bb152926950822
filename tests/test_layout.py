"""The layout rules: no import cycles among spire's modules, and no private name imported across modules."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests.test_imports import HEAVY

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("spire", "spire_core")


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def _module_level(tree: ast.Module) -> Iterator[ast.stmt]:
    """The statements a module runs when imported, with those under ``if TYPE_CHECKING:`` (and other ifs)."""
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        node = pending.pop()
        yield node
        if isinstance(node, ast.If | ast.Try):
            pending.extend(node.body)
            pending.extend(node.orelse)


def _imports(path: Path, modules: dict[str, Path]) -> Iterator[tuple[str, list[str]]]:
    """``(module, names)`` for each module-level import of one of spire's modules (type-checking ones too).

    An import inside a function runs only when called, after every module is loaded: it is no
    import cycle (``test_an_import_inside_a_function_is_only_of_a_heavy_module`` bounds those).
    """
    for node in _module_level(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [alias.name for alias in node.names]
            submodules = [f"{node.module}.{name}" for name in names if f"{node.module}.{name}" in modules]
            if node.module in modules:
                yield node.module, [name for name in names if f"{node.module}.{name}" not in modules]
            for submodule in submodules:
                yield submodule, []
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in modules:
                    yield alias.name, []


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for target, _ in _imports(path, modules):
            # A package's __init__ re-exports its modules: an edge into it is not a dependency of theirs.
            if target != name and not (modules[target].name == "__init__.py" and name.startswith(target + ".")):
                graph[name].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycles_among_spires_modules() -> None:
    assert _cycles(_graph()) == []


def test_no_module_imports_a_private_name_from_another() -> None:
    modules = _modules()
    private = [
        f"{name} imports {target}.{imported}"
        for name, path in modules.items()
        for target, names in _imports(path, modules)
        for imported in names
        if imported.startswith("_") and not imported.startswith("__")
    ]
    assert private == []


def _every_import(path: Path, modules: dict[str, Path]) -> Iterator[str]:
    """Each of spire's modules that ``path`` imports anywhere: at module level, under ``TYPE_CHECKING``
    or inside a function (a lazy import still ties the two parts together)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
            yield from (name for name in names if name in modules)
            if node.module in modules:
                yield node.module
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names if alias.name in modules)


def _folder(module: str) -> str | None:
    """The folder of ``spire_core`` a module sits in (``spire_core.backend.browser.pool``: ``backend``);
    ``None`` for a module directly in ``spire_core`` or outside it."""
    parts = module.split(".")
    if parts[0] != "spire_core" or (len(parts) < 3 and not (ROOT / "spire_core" / parts[-1]).is_dir()):
        return None
    return parts[1]


def _folder_edges() -> dict[tuple[str, str], list[str]]:
    """``(folder, other folder)`` -> the imports that make the first depend on the second."""
    modules = _modules()
    edges: dict[tuple[str, str], list[str]] = {}
    for name, path in modules.items():
        here = _folder(name)
        for target in _every_import(path, modules):
            there = _folder(target)
            if here is not None and there is not None and here != there:
                edges.setdefault((here, there), []).append(f"{name} -> {target}")
    return edges


def test_no_two_folders_of_spire_core_import_each_other_both_ways() -> None:
    edges = _folder_edges()
    both_ways = {
        f"{a} <-> {b}": sorted(edges[a, b] + edges[b, a]) for (a, b) in sorted(edges) if a < b and (b, a) in edges
    }
    assert both_ways == {}


def test_the_folder_check_sees_a_folder_and_its_modules() -> None:
    assert _folder("spire_core.backend.browser.pool") == "backend"
    assert _folder("spire_core.robots") == "robots"
    assert _folder("spire_core.crawler") is None
    assert _folder("spire.router") is None
    assert ("robots", "backend") in _folder_edges()  # the robots cache fetches through a backend


def _imports_inside_functions(path: Path, modules: dict[str, Path]) -> Iterator[str]:
    """Each of spire's modules that a function (or method) body in ``path`` imports."""
    for function in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(function):
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    submodules = [f"{node.module}.{alias.name}" for alias in node.names]
                    found = [name for name in submodules if name in modules]
                    yield from found or ([node.module] if node.module in modules else [])
                elif isinstance(node, ast.Import):
                    yield from (alias.name for alias in node.names if alias.name in modules)


def test_an_import_inside_a_function_is_only_of_a_heavy_module() -> None:
    """A lazy import is for start-up time (a module ``import spire`` leaves alone, often behind an
    optional extra), never a way round an import cycle: move the code instead."""
    modules = _modules()
    dodging = sorted(
        f"{name} imports {target}"
        for name, path in modules.items()
        for target in _imports_inside_functions(path, modules)
        if not target.startswith(HEAVY)
    )
    assert dodging == []
