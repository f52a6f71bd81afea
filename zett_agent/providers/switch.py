"""The switch that blocks real model requests, for test suites.

A test that reaches a real provider by accident costs money, flakes with the network and
leaks the conversation; one that reaches it on purpose should say so. With the switch on
(``block_model_requests()``; the app's pytest plugin turns it on for the whole test run),
every provider adapter raises ``ModelRequestsBlocked`` at the start of a request, before its
client is built or any connection is opened. ``ZETT_ALLOW_MODEL_REQUESTS=1`` in the
environment lets requests through anyway (a suite run against a real provider, on purpose);
``allow_model_requests()`` does the same for one block of code.

The switch is one process-wide flag, read when a request starts: a test's models are built
anywhere (settings, assistants, factories), and each must obey it without being told.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = [
    "ALLOW_VARIABLE",
    "ModelRequestsBlocked",
    "allow_model_requests",
    "block_model_requests",
    "check_model_request",
    "model_requests_blocked",
]

#: The environment variable that, set to ``1``, lets real requests through the switch.
ALLOW_VARIABLE = "ZETT_ALLOW_MODEL_REQUESTS"

_blocked = False


class ModelRequestsBlocked(RuntimeError):
    """A real model request was made while they are blocked (inside tests).

    Not a ``ProviderError``: nothing retries it or falls back from it, and a handler of
    provider failures never mistakes it for an outage.
    """


def block_model_requests(blocked: bool = True) -> None:
    """Turn the switch on (``blocked=False``: off) for the whole process."""
    global _blocked
    _blocked = bool(blocked)


def model_requests_blocked() -> bool:
    """Whether a real request made now would be refused."""
    return _blocked and os.environ.get(ALLOW_VARIABLE, "").strip() != "1"


@contextmanager
def allow_model_requests() -> Iterator[None]:
    """Let real requests through inside the block; the switch is as it was after."""
    global _blocked
    before, _blocked = _blocked, False
    try:
        yield
    finally:
        _blocked = before


def check_model_request(label: str) -> None:
    """Raise ``ModelRequestsBlocked`` when the switch is on; ``label`` names who was asked."""
    if model_requests_blocked():
        raise ModelRequestsBlocked(
            f"A real model request to {label} was blocked: requests to model providers are "
            f"off inside tests. Give the assistant a ScriptModel (agent_app.testing), or set "
            f"{ALLOW_VARIABLE}=1 to let real requests through."
        )
