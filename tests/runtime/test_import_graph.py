"""The shape of ``zett_agent``, read from its own source: its import graph has no cycle.

Every import counts (``tests/import_graph.py``): at the top, inside a function, under
``TYPE_CHECKING``. A type hint imports its name from the module that defines it, never
from one that re-exports it (``zett_agent.agent`` re-exports the context: a hint that
imported from there would tie every extension to the whole agent).
"""

from __future__ import annotations

import ast

from tests.import_graph import cycles_of, modules

#: The cycles left, so that no new one joins them unnoticed (the list only shrinks). The
#: context and two things it holds name each other in type hints only: an extension's
#: hooks and ``current_run_context()`` name ``AgentRunContext``, and the context names
#: its ``extensions`` and ``tools``.
KNOWN_CYCLES = [
    ["zett_agent._context", "zett_agent.extensions.base", "zett_agent.tools.base"],
]


def test_the_import_graph_of_zett_agent_has_no_cycle():
    assert [cycle for cycle in cycles_of("zett_agent") if cycle not in KNOWN_CYCLES] == []


def test_without_type_hints_the_import_graph_of_zett_agent_has_no_cycle_at_all():
    """What runs imports in one direction only: the known cycles are type hints alone."""
    assert cycles_of("zett_agent", runtime_only=True) == []


def test_every_known_cycle_is_still_one():
    """A cycle untangled leaves ``KNOWN_CYCLES`` with it."""
    assert [cycle for cycle in KNOWN_CYCLES if cycle not in cycles_of("zett_agent")] == []


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
