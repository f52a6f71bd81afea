"""The shape of ``agent_app``, read from its own source: its layers (no import runs up
them), no cycle, no private cross-import, no single-process branch in the sessions, short
functions, classes and modules, and a small ``LiveSession``.

The import graph counts every import (``tests/import_graph.py``): at the top, inside a
function, under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import agent_app
from tests.import_graph import cycles_of, imports, js_cycles, modules

ROOT = Path(agent_app.__file__).parent
#: The chat's ES modules (the vendored libraries below it are not the app's).
SCRIPTS = ROOT / "static" / "agent_app"

#: Longest function or method the app may have, in lines (decorators and docstring too).
MAX_FUNCTION_LINES = 60
#: Longest ``agent_app/sessions/live.py`` may be: the session's story and what it holds,
#: with every responsibility of its own in a collaborator (door, replies, follower, run,
#: settling).
MAX_LIVE_SESSION_LINES = 300
#: Functions still over the limit, each owned by work in progress (the list only shrinks).
LONG_FUNCTIONS: set[str] = set()
#: Longest class of the app or the runtime, in lines (decorators and docstring too).
MAX_CLASS_LINES = 400
#: Longest module of the app or the runtime, in lines.
MAX_MODULE_LINES = 600

#: The app's layers, lowest first: a module may import from its own layer and those
#: below, never from one above. An entry is a package or a top-level module, never a
#: module of a package placed apart from it: what a lower layer needs of a package moves
#: down to the layer that owns it, or is handed in where the app is wired up
#: (``AgentAppConfig.ready``).
LAYERS: list[tuple[str, ...]] = [
    # What every layer reads: settings, the wire format (with the refusals every layer
    # raises), a process's plumbing (its loops, its drain), the app's signals.
    ("conf", "protocol", "process", "signals"),
    # The tables, what checks their rows, and the statements every layer above writes with.
    ("models",),
    ("telemetry",),
    ("bus",),
    # Files attached to a message, and the assistants a chat talks to (who is chatting,
    # which model answers).
    ("attachments",),
    ("assistants",),
    ("webhooks",),
    # What outlives a process: runs, messages, waits, recovery, a chat's support state.
    ("durable",),
    # Who is asking and what they may: whose chat, budgets of frames, tokens, bodies.
    ("guard",),
    ("budgets",),
    # People in the loop: their records, the handoff tool, who is staff.
    ("people",),
    ("agents",),
    # A session's life in this process, and where every client enters it.
    ("sessions",),
    ("agui",),
    ("websocket", "consumers", "routing"),
    ("api", "background", "schedules"),
    # Django's edges: pages, URLs, admin, checks, commands, start-up, the testing kit.
    (
        "views",
        "export",
        "urls",
        "health_urls",
        "admin",
        "checks",
        "production_checks",
        "templatetags",
        "management",
        "testing",
        "apps",
        "asgi",
        "headers",
    ),
]


def _imports() -> list[tuple[str, str, str]]:
    return imports(modules("agent_app"))


def _layer_of(module: str) -> tuple[str, int] | None:
    """The entry of ``LAYERS`` that places ``module`` (its package, or itself when it is
    a top-level module) and its layer."""
    top = module.split(".")[1] if "." in module else None
    for index, layer in enumerate(LAYERS):
        if top in layer:
            return f"agent_app.{top}", index
    return None


def test_every_module_of_the_app_has_a_layer_and_every_entry_a_module():
    found = modules("agent_app")
    assert [name for name in found if name != "agent_app" and _layer_of(name) is None] == []
    entries = [f"agent_app.{entry}" for layer in LAYERS for entry in layer]
    assert [entry for entry in entries if entry not in found] == []
    assert len(entries) == len(set(entries))


def test_every_entry_is_a_package_or_a_top_level_module():
    """No module of a package sits apart from its package: a package is one layer."""
    assert [entry for layer in LAYERS for entry in layer if "." in entry] == []


def test_no_import_runs_up_the_layers():
    upward = set()
    for importer, imported, _ in _imports():
        low, high = _layer_of(importer), _layer_of(imported)
        if low is not None and high is not None and high[1] > low[1]:
            upward.add(f"{importer} ({low[0]}) imports {imported} ({high[0]})")
    assert sorted(upward) == []


def test_the_import_graph_of_agent_app_has_no_cycle():
    assert cycles_of("agent_app") == []


def test_no_module_imports_another_modules_private_names():
    private = [
        f"{importer} imports {name} from {imported}"
        for importer, imported, name in _imports()
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
        for importer, imported, _ in _imports()
        if importer.startswith("agent_app.bus") and imported.startswith("agent_app.sessions")
    ]
    assert leaks == []


def _functions() -> list[tuple[str, int]]:
    """``(dotted name, lines)`` of every function and method of the app."""
    found = []
    for module, (path, _) in modules("agent_app").items():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                    owner = f".{node.name}" if isinstance(node, ast.ClassDef) else ""
                    start = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                    found.append((f"{module}{owner}.{child.name}", child.end_lineno - start + 1))
    return found


def test_no_function_of_the_app_is_longer_than_60_lines():
    long = [
        f"{name}: {lines} lines"
        for name, lines in _functions()
        if lines > MAX_FUNCTION_LINES and name not in LONG_FUNCTIONS
    ]
    assert long == []


def test_every_function_listed_as_long_still_is():
    """An entry of ``LONG_FUNCTIONS`` goes once its function is short (or gone)."""
    lengths = dict(_functions())
    assert [name for name in LONG_FUNCTIONS if lengths.get(name, 0) <= MAX_FUNCTION_LINES] == []


def test_the_live_session_is_under_300_lines():
    source = (ROOT / "sessions" / "live.py").read_text()
    classes = [
        node
        for node in ast.parse(source).body
        if isinstance(node, ast.ClassDef) and node.name == "LiveSession"
    ]
    assert len(classes) == 1
    assert classes[0].end_lineno - classes[0].lineno + 1 < MAX_LIVE_SESSION_LINES
    assert len(source.splitlines()) <= MAX_LIVE_SESSION_LINES


def _classes(package: str) -> list[tuple[str, int]]:
    """``(dotted name, lines)`` of every class of ``package``."""
    found = []
    for module, (path, _) in modules(package).items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                found.append((f"{module}.{node.name}", node.end_lineno - start + 1))
    return found


@pytest.mark.parametrize("package", ["agent_app", "zett_agent"])
def test_no_class_is_longer_than_400_lines(package):
    long = [f"{name}: {lines}" for name, lines in _classes(package) if lines > MAX_CLASS_LINES]
    assert long == []


@pytest.mark.parametrize("package", ["agent_app", "zett_agent", "bench"])
def test_no_module_is_longer_than_600_lines(package):
    root = Path(importlib.import_module(package).__file__).parent
    long = [
        f"{path.relative_to(root.parent)}: {lines}"
        for path in root.rglob("*.py")
        if "migrations" not in path.parts
        and ".venv" not in path.parts
        and (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    ]
    assert long == []


def test_the_chat_scripts_import_each_other_without_a_cycle():
    assert js_cycles(SCRIPTS) == []


def test_no_chat_script_is_longer_than_600_lines():
    long = [
        f"{path.name}: {lines}"
        for path in sorted(SCRIPTS.glob("*.js"))
        if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    ]
    assert long == []
