"""Every page of zett loads theme.js in its <head> before any stylesheet, as an external
classic script (the CSP allows no inline one), and the chat page and the list offer the
Theme choice; the chat page links its two exports."""

from __future__ import annotations

import re
import uuid

import pytest
from django.test import Client
from django.urls import reverse

pytestmark = pytest.mark.django_db

THEME_SCRIPT = re.compile(r'<script src="[^"]*agent_app/theme\.js"></script>')


def head_of(html: str) -> str:
    return html.split("</head>", 1)[0]


@pytest.mark.parametrize(
    "url",
    [
        reverse("agent_app:session_list"),
        reverse("agent_app:chat", kwargs={"session_id": "0b6a7c1e-0000-4000-8000-000000000001"}),
        "/no-such-page/",
    ],
)
def test_theme_js_comes_before_every_stylesheet(client: Client, url: str) -> None:
    head = head_of(client.get(url).content.decode())
    script = THEME_SCRIPT.search(head)
    assert script is not None
    assert script.start() < head.index('rel="stylesheet"')
    assert "<script>" not in head and 'type="module">' not in head  # nothing inline


def test_the_chat_page_offers_the_theme_choice_and_its_exports(client: Client) -> None:
    session_id = uuid.uuid4()
    html = client.get(reverse("agent_app:chat", kwargs={"session_id": session_id})).content.decode()
    assert html.count("data-zett-theme-control") == 1
    assert '<label class="theme-choice__label" for="theme-choice">Theme</label>' in html
    for name in ("export_markdown", "export_json"):
        assert html.count(reverse(f"agent_app:{name}", kwargs={"session_id": session_id})) == 2
