"""Admitting runs and model calls against the ledger: waits, hand-over, the extension.

``agent_app.budgets.ledger`` decides on numbers; this module is where the deciding waits.

- **Before a run starts** (``admit_run``, the socket's ``user_message``, ``regenerate`` and
  ``edit_last``): a person whose budget is used up is refused with ``BudgetExceeded`` (an
  ``error`` frame ``budget_exceeded``), and nothing is stored. Otherwise the run's first
  model call is admitted right there and its ticket handed over to the run (by session:
  one run per session), so runs started at once are refused at the start, not after.
- **Before each model call** (``BudgetExtension.before_model``): the call is admitted (the
  first one with the ticket handed over). A refusal raises ``BudgetExceeded`` out of the
  run, which ends ``budget_exceeded`` with no further model call; the call in flight
  before it was settled normally. ``on_model_request`` settles the call when its stream
  ends, however it ends (cancelled and failed calls count what they reported: nothing).

**Waits.** An undecided admission (calls in flight could use up what is left) waits for
a call of the same person to settle and asks again. A settle in this process wakes the
waiters at once; one in another worker is seen at the next poll (every ``_POLL`` seconds
at most). A wait is cancellable at every step (it is the run's, or the socket's, task).
The start check waits at most ``START_WAIT`` seconds, then lets the run start undecided
(its first call decides); a model call waits at most ``CALL_WAIT`` seconds, then goes
ahead if the limit is not reached (a call that long, or a worker that died mid-call,
can then let the budget be passed by more than one call).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing, asynccontextmanager
from typing import TYPE_CHECKING

from channels.db import database_sync_to_async

from agent_app import conf
from agent_app.budgets import ledger
from agent_app.budgets.ledger import BudgetExceeded, Person, Ticket
from agent_app.durable.persistence import shielded
from zett_agent.extensions.base import AgentExtension
from zett_agent.extensions.events import ExtensionEvent, RunCancelledEvent
from zett_agent.model import ModelEvent, ModelEventType, ModelRequest, ModelUsage

if TYPE_CHECKING:
    from zett_agent.agent import AgentRunContext

__all__ = ["BUDGETS", "CALL_WAIT", "START_WAIT", "BudgetExtension", "admit", "admit_run"]

#: Longest a run's start waits for the calls in flight to settle (seconds).
START_WAIT = 10.0
#: Longest a model call waits for them (seconds).
CALL_WAIT = 60.0
#: Longest pause between two looks at the ledger while waiting (seconds).
_POLL = 0.5

_limit_for = database_sync_to_async(ledger.limit_for)
_try_admit = database_sync_to_async(ledger.try_admit)
_settle = database_sync_to_async(ledger.settle)

#: Futures of the waiters of this process, by person key (woken by a settle here).
_waiters: dict[str, set[asyncio.Future[None]]] = {}
#: Tickets admitted at a run's start, by session, for the run's first model call.
_handed: dict[str, Ticket] = {}


async def _wait_for_settle(person: str, seconds: float) -> None:
    future = asyncio.get_running_loop().create_future()
    waiting = _waiters.setdefault(person, set())
    waiting.add(future)
    try:
        await asyncio.wait([future], timeout=seconds)
    finally:
        waiting.discard(future)
        if not waiting:
            _waiters.pop(person, None)


def _wake(person: str) -> None:
    for future in _waiters.get(person, ()):
        if not future.done():
            future.set_result(None)


async def settle(ticket: Ticket, usage: ModelUsage | None = None) -> None:
    """Settle an admitted call (``ledger.settle``) and wake this process's waiters."""
    try:
        if usage is None:
            await _settle(ticket)
        else:
            await _settle(ticket, usage.input_tokens, usage.output_tokens)
    finally:
        _wake(ticket.person)


async def admit(person: Person, limit: int, *, wait: float) -> Ticket | None:
    """A ticket for one model call; ``BudgetExceeded`` when refused; None when still
    undecided after ``wait`` seconds."""
    loop = asyncio.get_running_loop()
    give_up = loop.time() + wait
    pause = 0.02
    while True:
        outcome = await _try_admit(person, limit)
        if isinstance(outcome, BudgetExceeded):
            raise outcome
        if outcome is not None:
            return outcome
        left = give_up - loop.time()
        if left <= 0:
            return None
        await _wait_for_settle(person.key, min(pause, left))
        pause = min(pause * 2, _POLL)


@asynccontextmanager
async def admit_run(person: Person | None, session_id: str) -> AsyncIterator[None]:
    """Around starting a run: refuse (``BudgetExceeded``) or admit its first call.

    The ticket is handed to the run's first model call; if starting fails (the body
    raises), it is given back.
    """
    if person is None or not conf.ZETT_TOKEN_BUDGETS:
        yield  # no budgets: not a single await more than without them
        return
    limit = await _limit_for(person)
    if limit is None:
        yield
        return
    ticket = await admit(person, limit, wait=START_WAIT)
    if ticket is None:
        yield  # undecided: the run's first call decides
        return
    stale = _handed.pop(session_id, None)
    _handed[session_id] = ticket
    try:
        if stale is not None:
            await settle(stale)
        yield
    except BaseException:
        if _handed.get(session_id) is ticket:
            del _handed[session_id]
            await shielded(settle(ticket))
        raise


def _whose(session_id: str) -> tuple[Person, int] | None:
    """The person a chat belongs to and their limit; None: no budget applies."""
    person = ledger.person_of_session(session_id)
    limit = None if person is None else ledger.limit_for(person)
    return None if person is None or limit is None else (person, limit)


_whose_async = database_sync_to_async(_whose)


class BudgetExtension(AgentExtension):
    """Admits every model call of an app run against its person's budget, and settles it.

    Stateless between requests: its tickets are keyed by session and request, so one
    instance serves every chat's agent.
    """

    #: Early: a refused call costs no other extension's work.
    priority = 10

    def __init__(self) -> None:
        self._tickets: dict[tuple[str, str], Ticket] = {}

    async def before_model(self, context: AgentRunContext, request: ModelRequest) -> None:
        if not conf.ZETT_TOKEN_BUDGETS and not _handed:
            return  # no budgets: no query
        key = (context.session_id, context.request_id)
        if key in self._tickets:
            return  # admitted already (another extension rebuilt the request)
        handed = _handed.pop(context.session_id, None)
        whose = await _whose_async(context.session_id)
        if whose is None:
            if handed is not None:
                await shielded(settle(handed))
            return
        person, limit = whose
        if handed is not None and handed.person == person.key:
            self._tickets[key] = handed
            return
        if handed is not None:
            await shielded(settle(handed))
        ticket = await admit(person, limit, wait=CALL_WAIT)
        if ticket is None:
            ticket = await _try_admit(person, limit, force=True)
            if isinstance(ticket, BudgetExceeded):
                raise ticket
        assert ticket is not None
        self._tickets[key] = ticket

    async def on_error(self, context: AgentRunContext, error: Exception) -> None:
        """A request that failed between an admission and its call gives the ticket back."""
        await self._give_back(context)

    async def on_event(self, context: AgentRunContext, event: ExtensionEvent) -> None:
        """A request cancelled before its admitted call (Stop at once) gives it back too."""
        if isinstance(event, RunCancelledEvent):
            await self._give_back(context)

    async def _give_back(self, context: AgentRunContext) -> None:
        left = [
            self._tickets.pop((context.session_id, context.request_id), None),
            _handed.pop(context.session_id, None),
        ]
        for ticket in left:
            if ticket is not None:
                await shielded(settle(ticket))

    def on_model_request(
        self,
        context: AgentRunContext,
        request: ModelRequest,
        call_next: Callable[[ModelRequest], AsyncIterator[ModelEvent]],
    ) -> AsyncIterator[ModelEvent]:
        """A call with no ticket (no budget applies) is the model's stream itself: no layer
        per streamed event; an admitted one is settled when its stream ends."""
        if (context.session_id, context.request_id) not in self._tickets:
            return call_next(request)
        return self._settled(context, request, call_next)

    async def _settled(
        self,
        context: AgentRunContext,
        request: ModelRequest,
        call_next: Callable[[ModelRequest], AsyncIterator[ModelEvent]],
    ) -> AsyncIterator[ModelEvent]:
        # Taken when the stream starts, as a layer would: a stream never started leaves
        # the ticket for ``on_error`` to give back.
        ticket = self._tickets.pop((context.session_id, context.request_id), None)
        if ticket is None:
            async with aclosing(call_next(request)) as stream:
                async for event in stream:
                    yield event
            return
        usage: ModelUsage | None = None
        try:
            async with aclosing(call_next(request)) as stream:
                async for event in stream:
                    if event.type is ModelEventType.COMPLETED and event.response is not None:
                        usage = event.response.usage
                    yield event
        finally:
            await shielded(settle(ticket, usage))


#: The one instance every chat's agent carries (``agent_app.agents.factory``).
BUDGETS = BudgetExtension()
