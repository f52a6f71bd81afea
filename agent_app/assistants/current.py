"""Who is chatting, inside a run: ``current_user()`` and ``current_chat()``.

The live session calls ``agent_app.assistants.enter_run`` at the top of each run's task,
on whichever worker runs it and for continuation runs after a restart too. The chat and
its owner are read once a run, never once a call (in the thread hop that stores the run's
start, ``agent_app.assistants.read_entry``); ``enter_run`` checks that the owner may still
use the chat's assistant and puts both in this module's context variable (``bind``).
Everything the run does inherits that context: the runtime steps its request in a copy of
it, hooks and model calls run there, and sync tools run in worker threads with a copy of
it. So a tool, a hook or a model call anywhere in the run reads the person without a
query, and nothing outside the run (another chat's run, the socket's own task) ever sees
it.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_app.models import ChatSession

__all__ = ["bind", "current_chat", "current_user", "person_of_chat"]

_current: ContextVar[tuple[Any, ChatSession] | None] = ContextVar("zett_current_chat", default=None)


def current_user() -> Any:
    """The person of the running chat: a user, or ``AnonymousUser``."""
    return _bound()[0]


def current_chat() -> ChatSession:
    """The ``ChatSession`` of the running chat."""
    return _bound()[1]


def _bound() -> tuple[Any, ChatSession]:
    bound = _current.get()
    if bound is None:
        raise LookupError("current_user() and current_chat() are only available inside a run")
    return bound


def person_of_chat(chat: ChatSession) -> Any:
    """The chat's owner, or ``AnonymousUser`` for a chat of an anonymous browser."""
    from django.contrib.auth.models import AnonymousUser

    return chat.owner if chat.owner_id is not None else AnonymousUser()


def bind(user: Any, chat: ChatSession) -> None:
    """Bind ``user`` and ``chat`` to the calling task (for code that runs an agent itself)."""
    _current.set((user, chat))
