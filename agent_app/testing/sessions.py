"""Who a test's socket is, and tidying a test's event loop: ``ChatClient``'s plumbing.

A signed-in person's socket carries the session cookie a login sets (Django's test
``Client.force_login``, so any authentication backend and session engine the project uses
applies); an anonymous one carries the cookie of a browser that has visited a chat page
(a Django session holding its browser key, as the page's view stores it). Both are made
with the ORM, so they run in a thread (``sync_to_async``).
"""

from __future__ import annotations

import asyncio
import uuid
from importlib import import_module
from typing import Any

from django.conf import settings
from django.test import Client

__all__ = ["browser_cookie", "close_live_sessions", "login_cookie", "session_id_of"]


def login_cookie(user: Any) -> str:
    """The ``Cookie`` header of ``user`` signed in."""
    client = Client()
    client.force_login(user)
    name = settings.SESSION_COOKIE_NAME
    return f"{name}={client.cookies[name].value}"


def browser_cookie() -> str:
    """The ``Cookie`` header of a new anonymous browser that has opened a chat page."""
    from agent_app.guard.access import BROWSER_KEY_FIELD

    session = import_module(settings.SESSION_ENGINE).SessionStore()
    session[BROWSER_KEY_FIELD] = uuid.uuid4().hex
    session.save()
    return f"{settings.SESSION_COOKIE_NAME}={session.session_key}"


def session_id_of(chat: Any) -> str:
    """The id of ``chat``: a ``ChatSession``, a UUID or its text; a ``ValueError`` else."""
    value = getattr(chat, "pk", chat)
    try:
        return str(uuid.UUID(str(value)))
    except ValueError:
        raise ValueError(
            f"chat must be a chat's id (a UUID) or a ChatSession, got {chat!r}"
        ) from None


async def close_live_sessions(seconds: float) -> None:
    """Cancel the runs still going on this event loop and close its live sessions.

    Runs outlive sockets by design (a page may come back); a test's loop ends with the
    test, so whatever is still running is stopped here rather than leaked. A run that
    does not stop within ``seconds`` (a tool that ignores cancellation) fails
    with an ``AssertionError`` that says so.
    """
    from agent_app.sessions.registry import existing_live_sessions

    registry = existing_live_sessions()
    if registry is None:
        return
    try:
        await asyncio.wait_for(_stop(registry), seconds)
    except TimeoutError:
        raise AssertionError(
            f"The chat's runs did not stop within {seconds:g}s of being cancelled when the "
            f"test's last ChatClient closed (a tool that ignores cancellation?)"
        ) from None


async def _stop(registry: Any) -> None:
    from agent_app.protocol.refusals import NotRunning

    for live in registry:
        try:
            await live.cancel()
        except NotRunning:
            pass
        await live.wait_for_run()
    await registry.close()
