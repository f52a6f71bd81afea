"""Shared by the HTTP API tests: request bodies, API tokens, and the AG-UI checks.

``check_events`` parses every event with ``ag-ui-protocol``'s own models (no field outside
them) and checks the SSE ids (strictly increasing; every ``TEXT_MESSAGE_CONTENT`` has
one). ``validate_stream`` runs ``ag-ui-validate``'s rules over the bytes a server sent. The
``http`` fixture (import ``http_fixture``) sends requests through the real ASGI app.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Iterable
from typing import Any

import pytest
from ag_ui.core import Event
from ag_ui_validate.transport import TransportOptions, validate_body
from asgiref.sync import sync_to_async
from pydantic import BaseModel, TypeAdapter

from agent_app.agui.sse import CONTENT_TYPE
from tests.app.asgi_http import HttpCall
from tests.app.conftest import stop_live_runs
from tests.leaks import fail_on_leaked_tasks

EVENT = TypeAdapter(Event)


@pytest.fixture(name="http")
async def http_fixture():
    """``await http(method, url, headers=..., body=...) -> HttpCall`` (started)."""
    from zett_site.asgi import application

    before = set(asyncio.all_tasks())
    calls: list[HttpCall] = []

    async def call(method: str, url: str, **options) -> HttpCall:
        started = await HttpCall(application, method, url, **options).start()
        calls.append(started)
        return started

    yield call
    for started in calls:
        await started.disconnect()
    await stop_live_runs()
    await fail_on_leaked_tasks(before)


def run_input(thread_id: str, text: str | None = "hello", **extra: Any) -> dict[str, Any]:
    """A ``RunAgentInput`` whose last message is the user's ``text``."""
    messages = (
        []
        if text is None
        else [{"id": f"m-{uuid.uuid4().hex[:6]}", "role": "user", "content": text}]
    )
    body = {
        "threadId": thread_id,
        "runId": f"client-{uuid.uuid4().hex[:6]}",
        "state": {},
        "messages": messages,
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    body.update(extra)
    return body


def resume_input(thread_id: str, interrupt_id: str, payload: Any, status: str = "resolved"):
    entry = {"interruptId": interrupt_id, "status": status, "payload": payload}
    return run_input(thread_id, None, resume=[entry])


@sync_to_async
def make_token(username: str, **options: Any) -> tuple[Any, str]:
    """``(user, secret)``: a new user and an API token of theirs."""
    from django.contrib.auth import get_user_model

    from agent_app.guard.tokens import issue

    user = get_user_model().objects.create_user(username=username, password="unused-pw")
    _, secret = issue(user, **options)
    return user, secret


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}", "Content-Type": "application/json"}


def check_events(events: Iterable[Any]) -> None:
    """Each event parses with ag-ui-protocol's models; ids strictly increase."""
    ids = []
    for event in events:
        model = EVENT.validate_python(event.data)
        assert not model.model_extra, f"fields outside the AG-UI model: {model.model_extra}"
        for value in model.__dict__.values():
            for nested in value if isinstance(value, list) else [value]:
                if isinstance(nested, BaseModel):
                    assert not nested.model_extra, f"fields outside the AG-UI model: {nested}"
        if event.type == "TEXT_MESSAGE_CONTENT":
            assert event.id is not None, event
        if event.id is not None:
            ids.append(event.id)
    assert ids == sorted(set(ids)), ids


async def _chunks(text: str) -> AsyncIterator[bytes]:
    for line in text.splitlines(keepends=True):
        yield line.encode("utf-8")


async def validate_stream(text: str, *, allow: Iterable[str] = ()) -> list[Any]:
    """ag-ui-validate's findings on a recorded stream; fails on an error or warning whose
    rule is not in ``allow`` (returns the allowed ones, for the test to look at)."""
    result = await validate_body(_chunks(text), CONTENT_TYPE, TransportOptions(recorded=True))
    assert result.event_count > 0
    allowed, problems = [], []
    for finding in result.report.diagnostics:
        if finding.severity not in ("error", "warning"):
            continue
        (allowed if finding.rule in allow else problems).append(finding)
    assert not problems, [(d.rule, d.message) for d in problems]
    return allowed


async def post_run(http, secret: str, body: dict, assistant: str = "demo") -> HttpCall:
    """POST ``body`` to the assistant's AG-UI endpoint with the token ``secret``."""
    return await http(
        "POST", f"/api/ag-ui/{assistant}/", headers=bearer(secret), body=body_of(body)
    )


def body_of(data: dict[str, Any]) -> str:
    return json.dumps(data)
