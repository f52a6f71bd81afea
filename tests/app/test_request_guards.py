"""The pieces of the request guards that need no server: which endpoints have a body limit
(``agent_app.guard.bodies.limit_for``), that the guarded request leaves a posted form's
parsing to the application, and what the access log shows of a URL
(``agent_app.telemetry.access_log.without_query``). Against daphne: tests/app/processes/."""

from __future__ import annotations

import uuid

import pytest
from django.test import override_settings
from twisted.internet.address import IPv4Address
from twisted.web.http import Request

from agent_app.guard.bodies import API_MAX_BODY_BYTES, _guarded, api_body_limit, limit_for
from agent_app.telemetry.access_log import without_query


def test_zett_endpoints_have_body_limits_and_other_views_none():
    chat = uuid.uuid4()
    with override_settings(ZETT_ATTACHMENT_MAX_BYTES=1000, DATA_UPLOAD_MAX_MEMORY_SIZE=500):
        assert limit_for(f"/s/{chat}/attachments/") == 1000 + 64 * 1024
        assert limit_for("/api/ag-ui/demo/") == 500
        assert limit_for("/api/chats/") == 500
        assert limit_for(f"/api/chats/{chat}/cancel/") == 500
    with override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=None):
        assert limit_for("/api/ag-ui/demo/") == API_MAX_BODY_BYTES
    assert limit_for("/") is None
    assert limit_for("/admin/login/") is None
    assert limit_for("/no/such/page/") is None
    # The views are kept per URLconf: another one sends the same path elsewhere.
    with override_settings(ROOT_URLCONF="tests.app.prefixed_urls"):
        assert limit_for("/api/ag-ui/demo/") is None
        assert limit_for("/support/chat/api/ag-ui/demo/") == api_body_limit()
    assert limit_for("/api/ag-ui/demo/") == api_body_limit()


def test_the_access_log_shows_a_path_and_never_its_query():
    assert without_query("/api/chats/?token=zett_secret&page=2") == "/api/chats/?[redacted]"
    assert without_query("/api/chats/?") == "/api/chats/?[redacted]"
    assert without_query("/s/1/") == "/s/1/"


class _Channel:
    """What Twisted's ``Request`` asks of its connection before it answers."""

    transport = None
    _path = b"/form/"

    def getPeer(self) -> IPv4Address:
        return IPv4Address("TCP", "127.0.0.1", 40000)

    def getHost(self) -> IPv4Address:
        return IPv4Address("TCP", "127.0.0.1", 8000)


class _Recorded(Request):
    """Twisted's request as daphne's extends it: ``process`` sees it once it is whole."""

    seen: dict | None = None

    def process(self) -> None:
        self.seen = {"args": dict(self.args), "body": self.content.read()}


@pytest.mark.parametrize(
    "content_type, body",
    [
        (b"application/x-www-form-urlencoded", b"a=1&b=2"),
        (
            b"multipart/form-data; boundary=x",
            b'--x\r\nContent-Disposition: form-data; name="a"\r\n\r\n1\r\n--x--\r\n',
        ),
    ],
)
def test_the_guarded_request_leaves_a_posted_form_to_the_application(content_type, body):
    request = _guarded(_Recorded)(_Channel())
    request.requestHeaders.setRawHeaders(b"Content-Type", [content_type])
    request.gotLength(len(body))
    request.handleContentChunk(body)
    request.requestReceived(b"POST", b"/form/", b"HTTP/1.1")
    assert request.seen == {"args": {}, "body": body}
