"""The shape of ``agent_app``, read from its own imports: no cycle, no private cross-import.

Every import counts — at the top, inside a function, under ``TYPE_CHECKING`` — because a
cycle hidden in a function is still a cycle a reader has to untangle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import agent_app

ROOT = Path(agent_app.__file__).parent


def _modules() -> dict[str, tuple[Path, bool]]:
    found = {}
    for path in ROOT.rglob("*.py"):
        parts = ["agent_app", *path.relative_to(ROOT).with_suffix("").parts]
        if "migrations" in parts:
            continue
        is_package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


def _imports(modules: dict[str, tuple[Path, bool]]) -> list[tuple[str, str, str]]:
    """``(importer, imported module, name)`` for every import between two modules here."""
    found = []
    for module, (path, is_package) in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
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
                    if f"{base}.{alias.name}" in modules
                    else (base, alias.name)
                    for alias in node.names
                ]
            else:
                continue
            for target, name in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != module:
                    found.append((module, target, name))
    return found


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

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
                cycles.append(sorted(component))

    for node in list(edges):
        if node not in index:
            visit(node)
    return cycles


#: The cycles left to untangle, so that no new one can join them unnoticed (the list must
#: only ever shrink): the assistants registry and ``current`` import each other,
#: ``ChatSession.assistant_name`` asks the registry, and an assistant's default model comes
#: from the agent factory, whose MCP wiring reads the chat's person and stores MCP
#: questions; ``chat_records`` and ``guard.access`` import each other, and a deleted
#: chat's sockets are closed through the sessions' registry.
KNOWN_CYCLES = [
    [
        "agent_app.agents.elicitation",
        "agent_app.agents.factory",
        "agent_app.agents.mcp",
        "agent_app.assistants",
        "agent_app.current",
        "agent_app.durable.persistence",
        "agent_app.durable.store",
        "agent_app.durable.waits",
        "agent_app.models",
    ],
    [
        "agent_app.chat_records",
        "agent_app.durable.history",
        "agent_app.durable.runs",
        "agent_app.guard.access",
        "agent_app.sessions.follower",
        "agent_app.sessions.live",
        "agent_app.sessions.registry",
        "agent_app.sessions.replies",
        "agent_app.sessions.run",
    ],
]


def test_the_import_graph_of_agent_app_has_no_cycle():
    edges: dict[str, set[str]] = {}
    for importer, imported, _ in _imports(_modules()):
        edges.setdefault(importer, set()).add(imported)
    assert [cycle for cycle in _cycles(edges) if cycle not in KNOWN_CYCLES] == []


def test_no_module_imports_another_modules_private_names():
    private = [
        f"{importer} imports {name} from {imported}"
        for importer, imported, name in _imports(_modules())
        if name.startswith("_") and not name.startswith("__")
    ]
    assert private == []


def test_the_session_code_has_no_single_process_branch():
    """One bus for one worker or many: no ``cluster is None`` anywhere in the sessions."""
    branches = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "sessions").rglob("*.py")
        if "cluster is None" in path.read_text() or "cluster is not None" in path.read_text()
    ]
    assert branches == []


def test_the_transports_never_import_the_session_code():
    leaks = [
        f"{importer} imports {imported}"
        for importer, imported, _ in _imports(_modules())
        if importer.startswith("agent_app.bus") and imported.startswith("agent_app.sessions")
    ]
    assert leaks == []
