"""The site's HTTP handler keeps its request threads (``agent_app.process.request_threads``).

A request's sync work (here the ``request_started`` signal, which Django's handler sends
from the request's thread) runs in a thread of that request alone, as under Django's own
handler, but one kept for the next requests: requests one after another share one;
requests at the same time each have their own (they wait for each other here, which a
shared thread would turn into a deadlock); a request that failed never hands its thread
to another, and at most ``KEEP_IDLE`` threads wait idle. A kept thread's database
connections are closed at the end of each of its requests. Django's CSRF check of a view
exempt from it is answered without a trip to the request's thread; any other view is
checked there, and refused without a token, as before.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator

import pytest
from django.core.signals import request_started
from django.db import connections
from django.middleware.csrf import CsrfViewMiddleware

from agent_app.process.request_threads import KEEP_IDLE, RequestThreadsHandler
from tests.app.asgi_http import HttpCall

WAIT = 10.0


@pytest.fixture
def started() -> Iterator[list[Callable[[], None]]]:
    """Hooks called, in the request's thread, as each request starts (appended by a test)."""
    hooks: list[Callable[[], None]] = []

    def on_start(**kwargs: object) -> None:
        for hook in hooks:
            hook()

    request_started.connect(on_start, dispatch_uid="test-request-threads")
    try:
        yield hooks
    finally:
        request_started.disconnect(dispatch_uid="test-request-threads")


def threads_seen(hooks: list[Callable[[], None]]) -> list[threading.Thread]:
    seen: list[threading.Thread] = []
    hooks.append(lambda: seen.append(threading.current_thread()))
    return seen


@pytest.fixture
def csrf_checks(monkeypatch) -> list[tuple[str, threading.Thread]]:
    """Django's CSRF check of a view, recording the path and the thread it ran in (set
    before the handler is built: the handler takes the method when it loads)."""
    seen: list[tuple[str, threading.Thread]] = []
    check = CsrfViewMiddleware.process_view

    def recording(self, request, callback, args, kwargs):  # type: ignore[no-untyped-def]
        seen.append((request.path, threading.current_thread()))
        return check(self, request, callback, args, kwargs)

    monkeypatch.setattr(CsrfViewMiddleware, "process_view", recording)
    return seen


@pytest.fixture
def handler() -> Iterator[RequestThreadsHandler]:
    handler = RequestThreadsHandler()
    try:
        yield handler
    finally:
        handler.close()


async def get(handler: RequestThreadsHandler) -> int:
    call = await HttpCall(handler, "GET", "/no/such/page/").start()
    await call.read()
    return call.status


async def test_requests_one_after_another_share_one_thread_kept_for_them(started, handler):
    seen = threads_seen(started)
    assert [await get(handler) for _ in range(3)] == [404, 404, 404]
    assert len(seen) == 3 and len(set(seen)) == 1
    assert seen[0] is not threading.current_thread() and seen[0].is_alive()
    assert handler.idle_threads == 1
    handler.close()
    assert handler.idle_threads == 0 and not seen[0].is_alive()


async def test_requests_at_the_same_time_each_have_a_thread_and_a_few_are_kept(started, handler):
    seen = threads_seen(started)
    together = KEEP_IDLE + 2
    # Every request's sync work waits for all the others': one shared thread would hang.
    barrier = threading.Barrier(together, timeout=WAIT)
    started.append(barrier.wait)
    statuses = await asyncio.gather(*(get(handler) for _ in range(together)))
    assert statuses == [404] * together
    assert len(set(seen)) == together
    assert handler.idle_threads == KEEP_IDLE
    kept = {thread for executor in handler._idle for thread in executor._threads}
    assert len(kept) == KEEP_IDLE and kept <= set(seen)
    for thread in set(seen) - kept:  # the others end after their request
        thread.join(WAIT)
        assert not thread.is_alive()


async def test_a_request_that_failed_does_not_hand_its_thread_on(started, handler):
    seen = threads_seen(started)

    def fail() -> None:
        raise RuntimeError("the request fails in its thread")

    started.append(fail)
    with pytest.raises(RuntimeError, match="fails in its thread"):
        await get(handler)
    assert handler.idle_threads == 0
    seen[0].join(WAIT)
    assert not seen[0].is_alive()
    started.remove(fail)
    assert await get(handler) == 404
    assert seen[1] is not seen[0]


@pytest.mark.django_db
async def test_only_views_not_exempt_from_csrf_are_checked_in_the_request_thread(
    csrf_checks, handler
):
    exempt = await HttpCall(handler, "GET", "/api/ag-ui/demo/capabilities").start()
    await exempt.read()
    assert exempt.status == 401  # the view ran: no credentials
    assert csrf_checks == []
    checked = await HttpCall(handler, "POST", "/accounts/logout/").start()
    await checked.read()
    assert checked.status == 403  # no CSRF token
    assert [path for path, _ in csrf_checks] == ["/accounts/logout/"]
    assert csrf_checks[0][1] is not threading.current_thread()


async def test_each_request_closes_its_threads_connections_at_its_end(
    started, handler, monkeypatch
):
    closed: list[threading.Thread] = []
    monkeypatch.setattr(connections, "close_all", lambda: closed.append(threading.current_thread()))
    seen = threads_seen(started)
    assert [await get(handler), await get(handler)] == [404, 404]
    assert closed == seen and seen[0] is seen[1]  # once per request, in the kept thread
