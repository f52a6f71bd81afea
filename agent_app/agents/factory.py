"""The agent factory: what each chat's agent is made of.

Which model answers is ``agent_app.assistants.llm.resolve_model``'s business.

``build_agent`` gives each chat one ``Agent`` made from the chat's assistant
(``agent_app.assistants``): its instructions, model, tools and extensions, plus what the
app adds to every agent: the ORM persistence, ``ask_user``, the durable approval gate for
the assistant's ``approval_required`` tools, the host-page tools of its ``browser_tools``
(``agent_app.agents.browser_tools``), tool guidelines, and attachments (the
``AttachmentExtension``, and its ``read_attachment`` tool in the chats that hold a
document), and the ``ask_<id>`` / ``transfer_to_<id>`` tools of its ``delegates`` and
``handoffs`` (``agent_app.agents.teamwork``). ``build_sub_agent`` makes the same agent for
a sub-run, with the sub-run's history instead of the chat's. Only the persistence
extension is the chat's own (it keeps the chat's rows); the reply extensions keep their
state per session and request, as every extension of an ``Agent`` serving many sessions
must, so one instance of each (per assistant) serves all chats.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from channels.db import database_sync_to_async

from agent_app import conf
from agent_app.agents import mcp
from agent_app.agents.approval import APPROVAL_REQUESTED_EVENT, ConfirmationExtension
from agent_app.agents.asking import AppAskUserExtension
from agent_app.agents.browser_tools import BROWSER_TOOL_EVENT, BrowserToolExtension
from agent_app.agents.teamwork import TeamworkExtension
from agent_app.assistants import Assistant, registry
from agent_app.assistants.current import current_chat
from agent_app.attachments.extension import AttachmentExtension
from agent_app.attachments.reading import has_documents, noted_documents, read_attachment_file
from agent_app.attachments.tool import read_attachment_tool
from agent_app.budgets import BUDGETS
from agent_app.durable.atomic import AtomicToolsExtension
from agent_app.durable.persistence import OrmPersistenceExtension, shielded
from agent_app.models import ChatSession, WaitStatus
from agent_app.people.tool import handoff_tools
from agent_app.telemetry import extensions_for
from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.extensions.ask_user import ASK_USER_TOOL_NAME
from zett_agent.extensions.base import AgentExtension
from zett_agent.extensions.tool_guidelines import ToolGuidelinesExtension
from zett_agent.model import AgentModel

if TYPE_CHECKING:
    from zett_agent.agent import AgentRunContext
    from zett_agent.messages import ToolCall

__all__ = [
    "assistant_of_chat",
    "build_agent",
    "build_sub_agent",
    "describe_wait",
    "serves",
]


async def _record_execution(context: AgentRunContext, call: ToolCall) -> None:
    """Before an approved tool runs: after a crash it must not run again (at most once)."""
    from agent_app.durable import waits

    await shielded(
        database_sync_to_async(waits.mark)(context.session_id, call.id, WaitStatus.EXECUTING)
    )


_GUIDELINES = ToolGuidelinesExtension()
#: Runs ``@tool(atomic=True)`` tools in a transaction that stores their result (stateless).
_ATOMIC = AtomicToolsExtension()
#: Attachments reach the model from storage, read when each request is built, and only the
#: files of the chat the run is in (the reader looks them up by the run's session id).
_READER = database_sync_to_async(read_attachment_file)
_ATTACHMENTS = AttachmentExtension(_READER)


class _ReadAttachmentOffer(AgentExtension):
    """Offer ``read_attachment`` to the requests of chats that hold a document (read with
    the chat, ``read_entry``, in the hop that stores the run; one query of its own
    otherwise): other chats' requests, and their tool guidelines, stay as they were."""

    def __init__(self) -> None:
        self.tool = read_attachment_tool(_READER)

    async def on_tool(self, context: AgentRunContext) -> None:
        holds = noted_documents(context.session_id)  # read with the chat as the run was stored
        if holds is None:
            holds = await database_sync_to_async(has_documents)(context.session_id)
        if holds:
            context.register_tool(self.tool)


_READING = _ReadAttachmentOffer()
#: The reply extensions of each (assistant, ``ZETT_REPLY_TIMEOUT``) in use (one pair per
#: assistant in production; tests change the setting), shared by all its chats' agents.
_REPLY_EXTENSIONS: dict[
    tuple[int, float], tuple[Assistant, AppAskUserExtension, ConfirmationExtension]
] = {}


def _reply_extensions(assistant: Assistant) -> tuple[AppAskUserExtension, ConfirmationExtension]:
    timeout = float(conf.ZETT_REPLY_TIMEOUT or 0)
    key = (id(assistant), timeout)
    entry = _REPLY_EXTENSIONS.get(key)
    if entry is None or entry[0] is not assistant:
        entry = _REPLY_EXTENSIONS[key] = (
            assistant,
            AppAskUserExtension(timeout=timeout or None),
            ConfirmationExtension(
                mcp.approval_names(assistant),
                timeout=timeout or None,
                on_execute=_record_execution,
                settled_elsewhere=mcp.settled_elsewhere,
            ),
        )
    return entry[1], entry[2]


#: The host-page tool extension of each (assistant, ``ZETT_BROWSER_TOOL_TIMEOUT``) in use.
_BROWSER_EXTENSIONS: dict[tuple[int, float], tuple[Assistant, BrowserToolExtension]] = {}


def _browser_extension(assistant: Assistant) -> BrowserToolExtension | None:
    """The assistant's ``browser_tools`` as one extension (None when it declares none)."""
    tools = assistant.get_browser_tools()
    if not tools:
        return None
    timeout = float(conf.ZETT_BROWSER_TOOL_TIMEOUT or 0)
    key = (id(assistant), timeout)
    entry = _BROWSER_EXTENSIONS.get(key)
    if entry is None or entry[0] is not assistant:
        entry = _BROWSER_EXTENSIONS[key] = (
            assistant,
            BrowserToolExtension(tools, timeout=timeout or None),
        )
    return entry[1]


def assistant_of_chat(session_id: str) -> Assistant:
    """The assistant chat ``session_id`` talks to (the default for a chat not stored)."""
    bound = ChatSession.objects.filter(pk=session_id).values_list("assistant", flat=True).first()
    return registry.resolve(bound)


def describe_wait(session_id: str, call: ToolCall) -> tuple[str, dict[str, Any]] | None:
    """``(event name, payload)`` of the wait a call will start, or None if it starts none.

    For recovery: a paused run's calls that never got to their question or approval are
    shown to the user right away, with the payload the run itself would have sent, by the
    chat's own assistant.
    """
    assistant = assistant_of_chat(session_id)
    asking, approval = _reply_extensions(assistant)
    if call.name == ASK_USER_TOOL_NAME:
        payload = asking.question_payload(session_id, call)
        return None if payload is None else ("ask_user", payload)
    if call.name in approval.tools_needing_approval:
        tool = next((tool for tool in assistant.get_tools() if tool.name == call.name), None)
        tool = tool or mcp.approval_tool(assistant, call.name)
        payload = approval.request_payload(call, tool)
        return None if payload is None else (APPROVAL_REQUESTED_EVENT, payload)
    browser = _browser_extension(assistant)
    if browser is not None and call.name in browser.tool_names:
        payload = browser.request_payload(call)
        return None if payload is None else (BROWSER_TOOL_EVENT, payload)
    return None


def _teamwork(assistant: Assistant) -> list[AgentExtension]:
    """The assistant's ``TeamworkExtension`` (none when it declares no delegates or
    handoffs), one per assistant."""
    if not (assistant.delegates or assistant.handoffs):
        return []
    entry = _TEAMWORK.get(id(assistant))
    if entry is None or entry[0] is not assistant:
        entry = _TEAMWORK[id(assistant)] = (
            assistant,
            TeamworkExtension(assistant, build_sub_agent),
        )
    return [entry[1]]


_TEAMWORK: dict[int, tuple[Assistant, TeamworkExtension]] = {}


def _extensions(assistant: Assistant, history: AgentExtension) -> list[AgentExtension]:
    """What every agent of ``assistant`` is made of, besides where its history lives."""
    browser = _browser_extension(assistant)
    return [
        history,
        BUDGETS,
        *_reply_extensions(assistant),
        *mcp.extensions_for(assistant),
        *([browser] if browser is not None else []),
        *_teamwork(assistant),
        _GUIDELINES,
        _ATTACHMENTS,
        _READING,
        *assistant.get_extensions(),
        *extensions_for(assistant.id),
    ]


#: The assistant each chat agent serves (``serves``).
_SERVES: weakref.WeakKeyDictionary[Agent, str] = weakref.WeakKeyDictionary()


def serves(agent: Agent) -> str | None:
    """The id of the assistant a chat's agent was built for (None: not built here)."""
    return _SERVES.get(agent)


async def build_agent(session_id: str, model: AgentModel | None = None) -> Agent:
    """The agent of one chat, from its assistant (``model`` overrides the assistant's)."""
    chat = await database_sync_to_async(ChatSession.objects.filter(pk=session_id).first)()
    assistant = registry.resolve(chat.assistant if chat is not None else None)
    agent = await Agent.create(
        model if model is not None else assistant.get_model(),
        config=AgentRunConfig(session_id=session_id),
        system_prompt=assistant.get_instructions(chat),
        tools=[*assistant.get_tools(), *handoff_tools(assistant.handoff)],
        # The chat's own agent: its atomic tools commit with their results in its rows.
        extensions=[_ATOMIC, *_extensions(assistant, OrmPersistenceExtension())],
    )
    # A steer typed while the answer is being written cuts it short at once: the person
    # keeps what they read, and the model goes on from there with the guidance.
    agent.steering_interrupts_stream = True
    _SERVES[agent] = assistant.id
    return agent


async def build_sub_agent(
    assistant: Assistant, session_id: str, history: AgentExtension, calls: AgentExtension
) -> Agent:
    """The agent of a sub-run of ``assistant`` in chat ``session_id``
    (``agent_app.agents.subruns``): the assistant's own agent, its history ``history``
    instead of the chat's, its tool calls kept at most once by ``calls``."""
    try:
        chat: ChatSession | None = current_chat()
    except LookupError:
        chat = None
    return await Agent.create(
        assistant.get_model(),
        config=AgentRunConfig(session_id=session_id),
        system_prompt=assistant.get_instructions(chat),
        tools=assistant.get_tools(),
        extensions=[calls, *_extensions(assistant, history)],
    )
