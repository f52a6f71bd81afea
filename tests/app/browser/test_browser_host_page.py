"""A host project's page in a real browser: the example shop (examples/shop/) serves zett
under /help/ inside its own base.html, with its own sign-in page; a customer signs in there,
starts a chat and gets an answer from the shop's own data."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.app.browser.browser_support import (
    ARTIFACTS,
    ROOT,
    LiveServer,
    _server_env,
    expect_connected,
    expect_idle,
    send,
)
from tests.app.servers import launch_daphne

pytest_plugins = ["tests.app.browser.browser_fixtures"]

SHOP = ROOT / "examples" / "shop"
CUSTOMER = """
from django.contrib.auth.models import User
from shop.models import Order
alice = User.objects.create_user("alice", password="alice-pw-123")
Order.objects.create(number=7, customer=alice, item="Red shoes", total_cents=8990)
"""


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    database = tmp_path_factory.mktemp("shop") / "shop.sqlite3"
    site = {
        "DJANGO_SETTINGS_MODULE": "myshop.settings",
        "PYTHONPATH": f"{SHOP}:{ROOT}",
        "SHOP_DATABASE": str(database),
    }
    env = _server_env(database, "shop.offline_model:ShopModel", site)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    log = ARTIFACTS / "shop-server.log"
    launched = launch_daphne(env, log, name="shop")
    port = launched.port
    try:
        subprocess.run(
            [sys.executable, "manage.py", "shell", "-c", CUSTOMER],
            cwd=SHOP,
            env=env,
            check=True,
            capture_output=True,
            timeout=120,
        )
        yield LiveServer(url=f"http://127.0.0.1:{port}", database=database, log=log)
    finally:
        launched.stop()


def test_a_customer_signs_in_on_the_shops_page_and_chats_inside_its_frame(
    page: Page, shop: LiveServer
) -> None:
    page.goto(f"{shop.url}/help/")
    expect(page.locator(".shop-header")).to_have_text("MyShop — shoes since 1999")
    page.get_by_role("link", name="Sign in").click()
    expect(page.get_by_role("heading", name="Sign in to MyShop")).to_be_visible()
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill("alice-pw-123")
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(f"{shop.url}/help/")
    expect(page.get_by_text("Signed in as alice")).to_be_visible()
    page.get_by_role("link", name="New chat").first.click()
    expect(page.locator(".shop-header")).to_be_visible()  # the chat page, in the shop's frame
    expect_connected(page)
    send(page, "Where is order 7?")
    expect_idle(page)
    expect(page.locator(".msg--assistant").last).to_contain_text("Red shoes")
