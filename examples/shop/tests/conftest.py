"""The shop's people: a customer with an order and a staff member (zett's own pytest plugin
brings the chat fixtures, ``zett_chat`` and ``script_model``).

With ``SHOP_REQUIRE_INSTALLED=1`` (the zett suite sets it) the tests refuse to run on a
zett that is not installed as a package: ``agent_app`` must come from site-packages.
"""

from __future__ import annotations

import os
from typing import Any

import pytest


def pytest_configure(config: Any) -> None:
    if os.environ.get("SHOP_REQUIRE_INSTALLED") == "1":
        import agent_app
        import zett_agent

        for package in (agent_app, zett_agent):
            assert "site-packages" in package.__file__, f"{package.__name__} is not installed"
        assert config.pluginmanager.has_plugin("agent_app.testing.pytest_plugin")


@pytest.fixture
def people(django_user_model):
    """A customer (alice, order 7) and a staff member with shop.view_order (bob, order 8)."""
    from django.contrib.auth.models import Permission
    from shop.models import Order

    alice = django_user_model.objects.create_user("alice", password="alice-pw-123")
    bob = django_user_model.objects.create_user("bob", password="bob-pw-123")
    bob.user_permissions.add(Permission.objects.get(codename="view_order"))
    Order.objects.create(number=7, customer=alice, item="Red shoes", total_cents=8990)
    Order.objects.create(number=8, customer=bob, item="Boots", total_cents=12000)
    return alice, bob
