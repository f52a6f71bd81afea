"""The agent factory: which model answers, and what every chat session's agent is made of.

``resolve_model`` reads ``settings.ZETT_MODEL`` each time it is called (when a session's
first request builds its agent), so a test's settings override takes effect without
reloading anything:

- ``demo`` → the offline ``DemoModel`` at ``settings.ZETT_DEMO_PACE``;
- anything else → ``zett_agent.providers.load_model``: ``openai:<model>``,
  ``anthropic:<model>``, or ``package.module:attribute`` (a model, or a class or callable
  building one). The import string is also the seam tests use to plug in a scripted model.

``build_agent`` gives each session one ``Agent`` with the demo tools, the ORM persistence,
``ask_user``, the approval gate for tools that change something, and tool guidelines. Only
the persistence extension is the session's own (it keeps the session's rows); the tools
and the other extensions keep their state per session and request, as every extension
of an ``Agent`` serving many sessions must, so one instance of each serves all sessions
(``ask_user`` alone builds a pydantic model for its tool).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from channels.db import database_sync_to_async
from django.core.exceptions import ImproperlyConfigured

from agent_app import conf
from agent_app.approval import APPROVAL_REQUESTED_EVENT, ConfirmationExtension
from agent_app.asking import AppAskUserExtension
from agent_app.models import WaitStatus
from agent_app.persistence import OrmPersistenceExtension, settle
from agent_app.tools import TOOLS_NEEDING_APPROVAL, demo_tools
from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.extensions.ask_user import ASK_USER_TOOL_NAME
from zett_agent.extensions.tool_guidelines import ToolGuidelinesExtension
from zett_agent.model import AgentModel
from zett_agent.providers import load_model
from zett_agent.providers.demo import DemoModel

if TYPE_CHECKING:
    from zett_agent.agent import AgentRunContext
    from zett_agent.messages import ToolCall

__all__ = ["SYSTEM_PROMPT", "build_agent", "describe_wait", "resolve_model"]

SYSTEM_PROMPT = (
    "You are zett, a helpful assistant in a web chat. Answer concisely in Markdown. "
    "Use the calculate tool for any arithmetic and current_time for dates and times. "
    "When a request is ambiguous, ask one short question with ask_user instead of guessing. "
    "save_note changes the database, so the user approves each call: if they deny it, say "
    "so and do not try again."
)


def resolve_model(spec: str | None = None) -> AgentModel:
    """Build the model named by ``spec`` (default ``settings.ZETT_MODEL``).

    ``demo`` is built here so ``settings.ZETT_DEMO_PACE`` applies; every other spec goes
    to ``zett_agent.providers.load_model``, whose errors become ``ImproperlyConfigured``.
    """
    spec = (spec if spec is not None else conf.ZETT_MODEL).strip()
    if spec in ("", "demo"):
        return DemoModel(pace=float(conf.ZETT_DEMO_PACE))
    try:
        return load_model(spec, openai_base_url=conf.ZETT_OPENAI_BASE_URL)
    except ValueError as error:
        raise ImproperlyConfigured(f"ZETT_MODEL={spec!r}: {error}") from error


async def _record_execution(context: AgentRunContext, call: ToolCall) -> None:
    """Before an approved tool runs: after a crash it must not run again (at most once)."""
    from agent_app import waits

    await settle(
        database_sync_to_async(waits.mark)(context.session_id, call.id, WaitStatus.EXECUTING)
    )


_TOOLS = demo_tools()
_GUIDELINES = ToolGuidelinesExtension()
#: The reply extensions of each ``ZETT_REPLY_TIMEOUT`` in use (one pair in production;
#: tests change the setting), shared by every session's agent.
_REPLY_EXTENSIONS: dict[float, tuple[AppAskUserExtension, ConfirmationExtension]] = {}


def _reply_extensions() -> tuple[AppAskUserExtension, ConfirmationExtension]:
    timeout = float(conf.ZETT_REPLY_TIMEOUT or 0)
    pair = _REPLY_EXTENSIONS.get(timeout)
    if pair is None:
        pair = _REPLY_EXTENSIONS[timeout] = (
            AppAskUserExtension(timeout=timeout or None),
            ConfirmationExtension(
                TOOLS_NEEDING_APPROVAL, timeout=timeout or None, on_execute=_record_execution
            ),
        )
    return pair


def describe_wait(session_id: str, call: ToolCall) -> tuple[str, dict[str, Any]] | None:
    """``(event name, payload)`` of the wait a call will start, or None if it starts none.

    For recovery: a paused run's calls that never got to their question or approval are
    shown to the user right away, with the payload the run itself would have sent.
    """
    asking, approval = _reply_extensions()
    if call.name == ASK_USER_TOOL_NAME:
        payload = asking.question_payload(session_id, call)
        return None if payload is None else ("ask_user", payload)
    if call.name in approval.tools_needing_approval:
        tool = next((tool for tool in _TOOLS if tool.name == call.name), None)
        payload = approval.request_payload(call, tool)
        return None if payload is None else (APPROVAL_REQUESTED_EVENT, payload)
    return None


async def build_agent(session_id: str, model: AgentModel | None = None) -> Agent:
    """The agent of one session (``model`` defaults to ``resolve_model()``)."""
    return await Agent.create(
        model if model is not None else resolve_model(),
        config=AgentRunConfig(session_id=session_id),
        system_prompt=SYSTEM_PROMPT,
        tools=_TOOLS,
        extensions=[OrmPersistenceExtension(), *_reply_extensions(), _GUIDELINES],
    )
