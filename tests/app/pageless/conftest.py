"""Every test here starts and ends with the process's view of the webhooks read afresh:
a test's webhooks leave with its database, which no signal tells the cache."""

from __future__ import annotations

import pytest

from agent_app.webhooks.events import forget_listeners


@pytest.fixture(autouse=True)
def fresh_webhook_listeners():
    forget_listeners()
    yield
    forget_listeners()
