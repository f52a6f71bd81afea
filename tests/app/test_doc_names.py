"""Every module, class or function the docs name by its dotted path exists: each
``agent_app.…`` and ``zett_agent.…`` name in docs/*.md, README.md and bench/README.md
imports, attribute by attribute. A module moved or a name renamed fails here, not in a
reader's project. The public paths kept for host projects and for the migrations after a
move (re-exports) are checked to be the very objects they re-export."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md", ROOT / "bench" / "README.md"]
NAME = re.compile(r"\b((?:agent_app|zett_agent)(?:\.[A-Za-z_]\w*)+)")
#: A dotted name of the docs that is no path: a permission (``app_label.codename``).
NOT_PATHS = {"agent_app.staff_chat"}


def _named() -> list[tuple[str, str]]:
    found = {}
    for page in PAGES:
        for name in NAME.findall(page.read_text()):
            if name not in NOT_PATHS:
                found.setdefault(name, page.relative_to(ROOT).as_posix())
    return sorted(found.items())


def _resolve(name: str) -> object:
    """The object ``name`` names: its longest importable module, then attributes."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            found = getattr(found, attribute)
        return found
    raise ModuleNotFoundError(name)


def test_the_docs_name_dotted_paths():
    assert len(_named()) > 40


@pytest.mark.parametrize(("name", "page"), _named())
def test_every_dotted_name_of_the_docs_exists(name, page):
    assert _resolve(name) is not None, f"{page} names {name}"


@pytest.mark.parametrize(
    ("kept", "home"),
    [
        # Host projects: the signals of people in the loop (docs/support.md).
        ("agent_app.people.signals.handoff_requested", "agent_app.signals.handoff_requested"),
        ("agent_app.people.signals.feedback_saved", "agent_app.signals.feedback_saved"),
        # Migration 0019 names the webhook secret's default by this path.
        ("agent_app.webhooks.models.new_secret", "agent_app.models.webhooks.new_secret"),
        ("agent_app.webhooks.models.Webhook", "agent_app.models.webhooks.Webhook"),
        # The security headers' middleware, from its short path (docs/embedding.md).
        (
            "agent_app.headers.SecurityHeadersMiddleware",
            "agent_app.guard.headers.SecurityHeadersMiddleware",
        ),
    ],
)
def test_a_kept_path_is_the_object_it_re_exports(kept, home):
    assert _resolve(kept) is _resolve(home)
