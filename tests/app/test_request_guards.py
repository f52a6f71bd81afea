"""The pieces of the request guards that need no server: which endpoints have a body limit
(``agent_app.guard.bodies.limit_for``), and what the access log shows of a URL
(``agent_app.telemetry.access_log.without_query``). Against daphne: tests/app/processes/."""

from __future__ import annotations

import uuid

from django.test import override_settings

from agent_app.guard.bodies import API_MAX_BODY_BYTES, limit_for
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


def test_the_access_log_shows_a_path_and_never_its_query():
    assert without_query("/api/chats/?token=zett_secret&page=2") == "/api/chats/?[redacted]"
    assert without_query("/api/chats/?") == "/api/chats/?[redacted]"
    assert without_query("/s/1/") == "/s/1/"
