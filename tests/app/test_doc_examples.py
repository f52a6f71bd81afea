"""Every Python example in docs/ that defines a tool or an assistant runs, as written.

Each such block is executed in a module of its own, after the defining blocks before it in
the same document (a reader reads on: a later block uses the earlier one's imports). Its
tools are built (a docstring the runtime refuses fails here, not in a reader's project)
and its assistants are registered in a registry of their own (an id, a model spec,
``approval_required`` naming a tool the assistant lacks). Imports of the reader's own
project (``shop.models``) get a stand-in module; everything else is imported for real.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
import types
from pathlib import Path

import pytest

import agent_app.assistants as assistants_module
from agent_app.assistants import Assistant, AssistantRegistry

DOCS = Path(__file__).resolve().parents[2] / "docs"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
DEFINES = re.compile(r"^@tool\b|^class \w+\((?:\w+\.)?Assistant\)", re.M)


def examples() -> list[tuple[str, str]]:
    """``(name, source)`` of each defining block; a block runs after the defining blocks
    before it in its doc, as a reader reads on (a later block uses the earlier imports)."""
    found = []
    for doc in sorted(DOCS.glob("*.md")):
        earlier: list[str] = []
        for number, block in enumerate(BLOCK.findall(doc.read_text()), start=1):
            if DEFINES.search(block):
                found.append((f"{doc.name}#{number}", "\n\n".join([*earlier, block])))
                earlier.append(block)
    return found


class _Anything:
    """What a stand-in module gives for any name: usable as a class, a value or a call."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        pass

    def __getattr__(self, name: str) -> _Anything:
        return _Anything()


def _stand_ins(source: str) -> dict[str, types.ModuleType]:
    """Stand-in modules for the imports of the reader's own project."""
    modules: dict[str, types.ModuleType] = {}
    for node in ast.walk(ast.parse(source)):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        for name in names:
            if importlib.util.find_spec(name.split(".")[0]) is None:
                for depth in range(1, name.count(".") + 2):
                    part = ".".join(name.split(".")[:depth])
                    module = types.ModuleType(part)
                    module.__getattr__ = lambda attribute: _Anything  # type: ignore[method-assign]
                    modules[part] = module
    return modules


def test_the_docs_have_examples_that_define_tools_and_assistants():
    names = [name for name, _ in examples()]
    assert any(name.startswith("embedding.md") for name in names)
    assert any(name.startswith("client.md") for name in names)


@pytest.mark.parametrize(("name", "source"), examples(), ids=[n for n, _ in examples()])
def test_an_example_runs_as_written(name, source, monkeypatch):
    own = AssistantRegistry()
    monkeypatch.setattr(assistants_module, "registry", own)
    monkeypatch.setattr(assistants_module, "register", own.register)
    for module_name, module in _stand_ins(source).items():
        monkeypatch.setitem(sys.modules, module_name, module)
    module_name = "docs_example_" + re.sub(r"\W", "_", name)
    namespace: dict[str, object] = {"__name__": module_name}
    exec(compile(source, name, "exec"), namespace)
    declared = [
        value
        for value in namespace.values()
        if isinstance(value, type) and issubclass(value, Assistant) and value is not Assistant
    ]
    for cls in declared:
        if cls.__dict__.get("id") and cls.__dict__.get("id") not in own.ids():
            own.register(cls)
    for assistant in own.all():
        tools = {t.name for t in getattr(assistant, "tools", []) or []}
        missing = set(getattr(assistant, "approval_required", ()) or ()) - tools
        assert not missing, f"{name}: approval_required names tools it lacks: {missing}"
