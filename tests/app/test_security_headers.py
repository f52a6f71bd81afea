"""Every page is served with a strict Content-Security-Policy, nosniff and a referrer policy."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db

#: A chat page of a fixed id: a test's id must be the same in every worker process.
CHAT_PAGE = "/s/5f0c2a8e-3b1d-4c6e-9a7f-2d8e4b6c1a90/"
PAGES = ["/", CHAT_PAGE, "/accounts/login/", "/admin/login/", "/no-such-page/"]


@pytest.mark.parametrize("path", PAGES)
def test_every_page_has_a_strict_policy_nosniff_and_a_referrer_policy(path):
    response = Client().get(path)
    policy = response.headers["Content-Security-Policy"]
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";"))
    assert directives["script-src"] == "'self'"
    assert directives["style-src"] == "'self'"
    assert directives["object-src"] == "'none'"
    assert directives["frame-ancestors"] == "'none'"
    assert "ws://testserver" in directives["connect-src"]
    assert "unsafe" not in policy
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["Referrer-Policy"] == "same-origin"


def test_the_policy_can_be_replaced_or_turned_off(settings):
    settings.ZETT_CONTENT_SECURITY_POLICY = "default-src 'none'"
    assert Client().get("/").headers["Content-Security-Policy"] == "default-src 'none'"
    settings.ZETT_CONTENT_SECURITY_POLICY = ""
    assert "Content-Security-Policy" not in Client().get("/").headers


def test_djangos_own_debug_pages_may_use_their_inline_style_and_nothing_else(settings):
    settings.DEBUG = True
    missing = Client().get("/no-such-page/")
    assert missing.status_code == 404
    directives = dict(
        part.strip().split(" ", 1) for part in missing.headers["Content-Security-Policy"].split(";")
    )
    assert directives["style-src"] == "'self' 'unsafe-inline'"
    assert directives["script-src"] == "'self'"
    page = Client().get("/")
    assert "unsafe" not in page.headers["Content-Security-Policy"]
