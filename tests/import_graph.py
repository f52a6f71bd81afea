"""A package's import graph, read from its own source with ``ast`` (nothing is imported).

Every import counts — at the top, inside a function, under ``TYPE_CHECKING`` — because a
cycle hidden in a function is still a cycle a reader has to untangle. Used by the
architecture tests of ``agent_app``, ``zett_agent`` and ``bench``; ``js_cycles`` does the
same for the chat's JavaScript modules (their ``import … from "./x.js"`` lines).
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path


def modules(package: str) -> dict[str, tuple[Path, bool]]:
    """``{dotted name: (path, is a package)}`` of every module of ``package``."""
    root = Path(importlib.import_module(package).__file__).parent
    found = {}
    for path in root.rglob("*.py"):
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        if "migrations" in parts or ".venv" in parts:
            continue
        is_package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


def _type_checking_only(tree: ast.Module) -> set[int]:
    """The ids of the import statements under ``if TYPE_CHECKING:``."""
    hidden = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            hidden.update(id(inner) for statement in node.body for inner in ast.walk(statement))
    return hidden


def imports(
    found: dict[str, tuple[Path, bool]], *, runtime_only: bool = False
) -> list[tuple[str, str, str]]:
    """``(importer, imported module, name)`` for every import between two modules here
    (``runtime_only``: leaving out those under ``TYPE_CHECKING``, which type hints need)."""
    edges = []
    for module, (path, is_package) in found.items():
        tree = ast.parse(path.read_text())
        hidden = _type_checking_only(tree) if runtime_only else set()
        for node in ast.walk(tree):
            if id(node) in hidden:
                continue
            if isinstance(node, ast.Import):
                targets = [(alias.name, "") for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    package = module.split(".")[: None if is_package else -1]
                    package = package[: len(package) - node.level + 1]
                    base = ".".join([*package, *([base] if base else [])])
                targets = [
                    (f"{base}.{alias.name}", "")
                    if f"{base}.{alias.name}" in found
                    else (base, alias.name)
                    for alias in node.names
                ]
            else:
                continue
            for target, name in targets:
                while target and target not in found:
                    target = target.rpartition(".")[0]
                if target and target != module:
                    edges.append((module, target, name))
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in edges.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in list(edges):
        if node not in index:
            visit(node)
    return found


def cycles_of(package: str, *, runtime_only: bool = False) -> list[list[str]]:
    """The import cycles among ``package``'s modules."""
    edges: dict[str, set[str]] = {}
    for importer, imported, _ in imports(modules(package), runtime_only=runtime_only):
        edges.setdefault(importer, set()).add(imported)
    return cycles(edges)


_JS_IMPORT = re.compile(r"""^\s*(?:import|export)\b[^;]*?\bfrom\s*["']\./([\w.-]+\.js)["']""", re.M)


def js_imports(folder: Path) -> dict[str, set[str]]:
    """``{module: modules it imports}`` of the ES modules in ``folder`` (``./x.js`` only)."""
    return {
        path.name: set(_JS_IMPORT.findall(path.read_text())) for path in sorted(folder.glob("*.js"))
    }


def js_cycles(folder: Path) -> list[list[str]]:
    """The import cycles among the ES modules in ``folder``."""
    return cycles(js_imports(folder))
