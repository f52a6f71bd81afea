"""The kit's tests register their assistants for each test and forget them after."""

from __future__ import annotations

import pytest

from agent_app.assistants import register, registry
from tests.app.kit.assistants import DONE, Back, Desk


@pytest.fixture(autouse=True)
def desk():
    DONE.clear()
    register(Desk)
    register(Back)
    yield DONE
    registry.unregister(Desk.id)
    registry.unregister(Back.id)
