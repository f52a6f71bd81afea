"""Progress lines from a long test, printed past pytest's output capture.

A stress test that runs for a minute or more says how far it is (``say``), so a terminal
never sits silent wondering whether it hung; the lines go to the terminal only, and
``-q`` runs show them too.
"""

from __future__ import annotations

import pytest


def say(request: pytest.FixtureRequest, line: str) -> None:
    """Print ``line`` on the terminal now, whatever pytest captures."""
    capture = request.config.pluginmanager.getplugin("capturemanager")
    if capture is None:
        print(line, flush=True)
        return
    with capture.global_and_fixture_disabled():
        print(f"\n  {line}", end="", flush=True)
