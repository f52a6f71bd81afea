"""Mounting the app in a host project: any URL prefix, LOGIN_URL, the socket URL from the
app, the origin check of ``agent_app.asgi.websocket_application`` (what Django admits in
DEBUG, and a logged reason for every refusal)."""

from __future__ import annotations

import json
import logging
import re
import uuid

import pytest
from django.test import Client

from agent_app.routing import socket_path
from tests.app.llm_doubles import say
from zett_agent.testing import ScriptedModel

pytestmark = pytest.mark.django_db(transaction=True)


def _config(html: str) -> dict:
    found = re.search(
        r'<script id="chat-config" type="application/json">(.*?)</script>', html, re.S
    )
    assert found, "the page carries its config"
    return json.loads(found.group(1))


def test_the_pages_work_under_any_prefix_and_link_to_the_hosts_login(settings):
    settings.ROOT_URLCONF = "tests.app.prefixed_urls"
    settings.LOGIN_URL = "signin"
    settings.ZETT_LOGOUT_URL = None
    client = Client()
    listing = client.get("/support/chat/")
    assert listing.status_code == 200
    html = listing.content.decode()
    assert 'href="/support/chat/s/' in html  # New chat, under the prefix
    assert 'href="/signin/?next=/support/chat/"' in html
    session_id = uuid.uuid4()
    page = client.get(f"/support/chat/s/{session_id}/")
    config = _config(page.content.decode())
    assert config["listUrl"] == "/support/chat/"
    assert config["renameUrl"] == f"/support/chat/s/{session_id}/rename/"
    assert config["socketPath"] == socket_path(session_id) == f"/ws/sessions/{session_id}/"


def test_required_login_redirects_to_the_hosts_login_url(settings):
    settings.ROOT_URLCONF = "tests.app.prefixed_urls"
    settings.LOGIN_URL = "/signin/"
    settings.ZETT_REQUIRE_LOGIN = True
    response = Client().get("/support/chat/")
    assert response.status_code == 302
    assert response["Location"].startswith("/signin/?next=")


def test_the_app_ships_no_login_or_admin_templates():
    from pathlib import Path

    import agent_app

    templates = Path(agent_app.__file__).parent / "templates"
    shipped = {path.relative_to(templates).parts[0] for path in templates.rglob("*.html")}
    assert shipped == {"agent_app"}


def test_a_hosts_base_template_frames_the_pages(settings, tmp_path):
    host = tmp_path / "agent_app"
    host.mkdir()
    (host / "base.html").write_text(
        "<html><head><title>{% block title %}{% endblock %}</title>{% block extra_head %}"
        "{% endblock %}</head><body><header>MyShop header</header>{% block content %}"
        "{% endblock %}</body></html>"
    )
    settings.TEMPLATES = [
        {**settings.TEMPLATES[0], "DIRS": [tmp_path, *settings.TEMPLATES[0]["DIRS"]]}
    ]
    html = Client().get(f"/s/{uuid.uuid4()}/").content.decode()
    assert "MyShop header" in html
    assert 'id="composer"' in html and 'id="chat-config"' in html  # the page, in the frame


async def test_debug_with_no_allowed_hosts_admits_localhost_like_django(
    sockets, use_model, settings
):
    use_model(ScriptedModel([say("Hi.")]))
    settings.DEBUG = True
    settings.ALLOWED_HOSTS = []
    socket = await sockets(origin="http://localhost:8000", headers=[(b"host", b"localhost:8000")])
    assert socket.connected
    settings.DEBUG = False
    refused = await sockets(origin="http://localhost:8000", headers=[(b"host", b"localhost:8000")])
    assert not refused.connected


async def test_a_refused_handshake_is_logged_with_its_reason(sockets, use_model, caplog):
    use_model(ScriptedModel())
    with caplog.at_level(logging.WARNING, logger="agent_app.guard.origins"):
        socket = await sockets(origin="http://evil.example")
    assert not socket.connected
    (record,) = [r for r in caplog.records if r.name == "agent_app.guard.origins"]
    assert "evil.example" in record.getMessage() and "ALLOWED_HOSTS" in record.getMessage()


def test_the_health_check_is_served_under_the_apps_prefix_and_at_the_root(settings):
    settings.ROOT_URLCONF = "tests.app.prefixed_urls"
    client = Client()
    for path in ("/support/chat/healthz", "/healthz"):
        response = client.get(path)
        assert response.status_code == 200, path
        assert response.json()["status"] == "ok" and response.json()["database"] is True
