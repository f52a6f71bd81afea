"""Progress lines from a long test, printed past pytest's output capture.

A stress test that runs for a minute or more says how far it is (``say``), so a terminal
never sits silent wondering whether it hung; the lines go to the terminal only, and
``-q`` runs show them too, as do runs in worker processes (prefixed with the worker).
"""

from __future__ import annotations

import sys

import pytest

from tests.parallel import worker_id


def say(request: pytest.FixtureRequest, line: str) -> None:
    """Print ``line`` on the terminal now, whatever pytest captures."""
    capture = request.config.pluginmanager.getplugin("capturemanager")
    if capture is None:
        print(line, flush=True)
        return
    worker = worker_id()
    with capture.global_and_fixture_disabled():
        if worker:  # a worker's stdout is its channel to the controller; stderr is the terminal
            print(f"  [{worker}] {line}", file=sys.stderr, flush=True)
        else:
            print(f"\n  {line}", end="", flush=True)
