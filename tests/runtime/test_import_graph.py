"""The shape of ``zett_agent``, read from its own source: its import graph has no cycle,
not even one of type hints alone.

Every import counts (``tests/import_graph.py``): at the top, inside a function, under
``TYPE_CHECKING``. A type hint imports its name from the module that defines it, never
from one that re-exports it (``zett_agent.agent`` re-exports the context: a hint that
imported from there would tie every extension to the whole agent).
"""

from __future__ import annotations

import ast

from tests.import_graph import cycles_of, imports, modules


def test_the_import_graph_of_zett_agent_has_no_cycle_not_even_through_type_hints():
    """The context and what it holds name each other one way only: tools and extensions
    name ``AgentRunContext`` in their hints, the context holds them by the protocols of
    ``zett_agent._held``."""
    assert cycles_of("zett_agent") == []


def test_the_context_imports_neither_tools_nor_extensions():
    """The arrow a hint would turn back (``_context`` → ``tools.base`` or
    ``extensions.base``) stays out, under ``TYPE_CHECKING`` too."""
    names = [
        imported
        for importer, imported, _ in imports(modules("zett_agent"))
        if importer == "zett_agent._context"
    ]
    assert [
        name
        for name in names
        if name.startswith(("zett_agent.tools", "zett_agent.extensions.base"))
    ] == []


def test_register_tool_still_refuses_what_is_not_a_tool():
    """The context checks a registered tool by its shape (``HeldTool``), which a plain
    function lacks and an ``AgentTool`` has."""
    from zett_agent._held import HeldTool
    from zett_agent.tools.base import AgentTool

    def plain(order: str) -> str:
        return order

    lookup = AgentTool("lookup", "Look an order up.", {"type": "object"}, plain)

    assert isinstance(lookup, HeldTool)
    assert not isinstance(plain, HeldTool)


def _defined_names(tree: ast.Module) -> set[str]:
    names = set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def test_type_hints_import_each_name_from_the_module_that_defines_it():
    found = modules("zett_agent")
    defined = {
        name: _defined_names(ast.parse(path.read_text())) for name, (path, _) in found.items()
    }
    borrowed = []
    for module, (path, _) in found.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)):
                continue
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom) and statement.module in defined:
                    borrowed += [
                        f"{module}: {alias.name} from {statement.module}"
                        for alias in statement.names
                        if f"{statement.module}.{alias.name}" not in found
                        and alias.name not in defined[statement.module]
                    ]
    assert borrowed == []
