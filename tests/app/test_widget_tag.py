"""``{% zett_chat %}`` and ``{% zett_visitor %}``: what the tags render, and the clear error
each bad option gets."""

from __future__ import annotations

import json
import re

import pytest
from django.contrib.auth.models import AnonymousUser
from django.contrib.sessions.backends.db import SessionStore
from django.template import Context, Template, TemplateSyntaxError
from django.test import RequestFactory

from agent_app.assistants import register, registry
from agent_app.guard.access import BROWSER_KEY_FIELD
from tests.app.widget_host.assistants import Second, Shopper

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def assistants():
    register(Shopper)
    register(Second)
    yield
    registry.unregister("shopper")
    registry.unregister("second")


def visit():
    request = RequestFactory().get("/products/7/")
    request.session = SessionStore()
    request.user = AnonymousUser()
    return request


def render(source: str, request=None) -> str:
    template = Template("{% load zett %}" + source)
    return template.render(Context({"request": request if request is not None else visit()}))


def configs(html: str) -> list[dict]:
    found = re.findall(r'<script type="application/json">(.*?)</script>', html, flags=re.S)
    return [json.loads(text) for text in found]


def test_a_widget_is_its_parts_in_an_open_shadow_root_and_the_script_that_mounts_it():
    html = render('{% zett_chat assistant="shopper" title="Ask the shop" height=480 %}')
    assert html.count('<template shadowrootmode="open">') == 1
    assert "<zett-chat" in html and "data-zett-chat" in html
    assert 'aria-label="Ask the shop"' in html and ">Ask the shop</h2>" in html
    assert 'data-part="transcript"' in html and 'data-part="composer"' in html
    assert "agent_app/widget.js" in html and "agent_app/chat.css" in html
    # The page's optional parts are absent, not hidden.
    for part in ("sidebar", "rename-chat", "delete-chat", "chat-actions"):
        assert part not in html
    (config,) = configs(html)
    assert config["assistant"] == "shopper"
    assert config["chatId"] is None
    assert config["height"] == "480px"
    assert config["socketPrefix"] == "/ws/sessions/"


def test_rendering_a_widget_gives_an_anonymous_visitor_a_browser_id():
    request = visit()
    render('{% zett_chat assistant="shopper" %}', request)
    assert request.session.get(BROWSER_KEY_FIELD)


def test_zett_visitor_renders_nothing_and_gives_the_browser_its_id():
    request = visit()
    assert render("{% zett_visitor %}", request) == ""
    assert request.session.get(BROWSER_KEY_FIELD)


def test_each_widget_remembers_its_chat_per_assistant_and_person():
    html = render('{% zett_chat assistant="shopper" %}{% zett_chat assistant="second" %}')
    first, second = configs(html)
    assert first["storageKey"].startswith("shopper:")
    assert second["storageKey"].startswith("second:")
    other = configs(render('{% zett_chat assistant="shopper" %}'))[0]
    assert other["storageKey"] != first["storageKey"]  # another browser, another chat


def test_options_reach_the_widget():
    chat = "6f1c1a0e-58c3-4a63-9b1f-2f0e9e6b3c11"
    html = render(
        f'{{% zett_chat assistant="second" chat="{chat}" launcher=True theme="dark" '
        'height="30rem" placeholder="Ask about shoes" launcher_label="Help" %}'
    )
    (config,) = configs(html)
    assert config["chatId"] == chat
    assert config["theme"] == "dark" and 'data-theme="dark"' in html
    assert config["height"] == "30rem"
    assert config["texts"] == {"placeholder": "Ask about shoes"}
    assert "data-launcher" in html and ">Help</button>" in html
    assert "a11y-light" not in html  # a forced dark theme loads only the dark code colours


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ('assistant="nobody"', "nobody"),
        ('assistant="shopper" height="tall"', "height must be a number of pixels"),
        ('assistant="shopper" chat="7"', "chat must be a chat id"),
        ('assistant="shopper" theme="neon"', "theme must be one of auto, light, dark"),
    ],
)
def test_a_bad_option_is_a_clear_template_error(options, message):
    with pytest.raises(TemplateSyntaxError, match=message):
        render("{% zett_chat " + options + " %}")


def test_without_the_request_in_the_context_the_error_says_how_to_fix_it():
    with pytest.raises(TemplateSyntaxError, match="needs the request in the template context"):
        Template('{% load zett %}{% zett_chat assistant="shopper" %}').render(Context({}))


def test_with_login_required_a_visitor_who_is_not_signed_in_gets_a_sign_in_link(settings):
    settings.ZETT_REQUIRE_LOGIN = True
    html = render('{% zett_chat assistant="shopper" %}')
    assert "Sign in to chat" in html and "next=/products/7/" in html.replace("%2F", "/")
    assert "zett-chat" not in html


def test_an_assistant_the_person_may_not_use_says_so_instead_of_a_chat():
    class Staff(Shopper):
        id = "staffonly"
        permission_required = "agent_app.view_chatsession"

    register(Staff)
    try:
        html = render('{% zett_chat assistant="staffonly" %}')
    finally:
        registry.unregister("staffonly")
    assert "You may not chat with" in html
    assert 'data-part="composer"' not in html and "widget.js" not in html


def test_a_widget_gets_its_chats_upload_url_and_the_csrf_token_the_upload_needs():
    request = visit()
    (config,) = configs(render('{% zett_chat assistant="shopper" %}', request))
    # The widget picks its chat's id in the browser: the URL says where it goes.
    assert config["attachmentsUrl"] == "/s/{chat}/attachments/"
    assert config["csrfToken"]
    assert request.META.get("CSRF_COOKIE")  # the response sets the cookie the token matches
