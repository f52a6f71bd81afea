"""Assistants that work together: ``delegates`` become ``ask_<id>``, ``handoffs``
become ``transfer_to_<id>``.

``TeamworkExtension`` (one per assistant that declares either, built by the factory)
offers the tools to each request, for the person of the chat:

- ``ask_<id>(request)`` for each delegate the person may use (``has_permission``; one they
  may not is not offered), that is not already running in the chain (no cycles), while
  the asking request is less than ``ZETT_MAX_DELEGATION_DEPTH`` levels deep. It runs that
  assistant as a sub-run (``agent_app.agents.subruns``) and returns its answer.
- ``transfer_to_<id>(reason)`` for each handoff target the person may use, in the chat's
  own run only (a sub-run cannot give the chat away). It binds the chat to that
  assistant (``ChatSession.assistant``) and ends the request after its tool batch
  (``AgentRunContext.end_after_tools``); the chat's run then lets the new assistant answer
  the rest of the turn (``agent_app.sessions.run``). Its result carries
  ``attributes["handoff"]`` (``from``, ``to``, ``name``, ``reason``), which is how the run
  and the page learn of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from channels.db import database_sync_to_async

from agent_app import conf
from agent_app.agents.subruns import CHAIN, Builder, run_sub_run, running
from agent_app.assistants.current import current_chat, current_user
from agent_app.models import ChatSession
from zett_agent.extensions.base import AgentExtension
from zett_agent.tools.base import AgentTool, ToolResult, current_run_context, tool

if TYPE_CHECKING:
    from agent_app.assistants import Assistant
    from zett_agent.agent import AgentRunContext

__all__ = ["HANDOFF_ATTRIBUTE", "TeamworkExtension", "ask_tool_name", "transfer_tool_name"]

#: The key of a handoff's result attributes.
HANDOFF_ATTRIBUTE = "handoff"


def ask_tool_name(assistant_id: str) -> str:
    return f"ask_{assistant_id}"


def transfer_tool_name(assistant_id: str) -> str:
    return f"transfer_to_{assistant_id}"


def _about(assistant: Assistant) -> str:
    description = assistant.description.strip()
    return f"{assistant.display_name}" + (f": {description}" if description else "")


def _assistant(assistant_id: str) -> Assistant:
    from agent_app.assistants import registry

    return registry.resolve(assistant_id)


def _ask_tool(owner: str, delegate_id: str, build: Builder) -> AgentTool:
    async def ask(request: str) -> str:
        """Ask another assistant.

        Args:
            request: What you need from it, in full: it sees only this, not the chat.
        """
        return await run_sub_run(owner, _assistant(delegate_id), request, build)

    delegate = _assistant(delegate_id)
    return tool(
        name=ask_tool_name(delegate_id),
        description=f"Ask the assistant {_about(delegate)}. Returns its answer.",
        guidelines=[
            f"Use when the request needs what {delegate.display_name} does; say everything "
            "it needs in `request`.",
        ],
        snippet=f'{ask_tool_name(delegate_id)}(request="...")',
        # Run again after a crash, it finds its sub-run and goes on from its checkpoint.
        idempotent=True,
    )(ask)


def _transfer_tool(owner: str, target_id: str, build: Builder) -> AgentTool:
    async def transfer(reason: str | None = None) -> ToolResult:
        """Hand the chat over to another assistant.

        Args:
            reason: Why, in a sentence (shown to the person).
        """
        target = _assistant(target_id)
        chat = current_chat()
        await database_sync_to_async(ChatSession.objects.filter(pk=chat.pk).update)(
            assistant=target.id
        )
        chat.assistant = target.id
        current_run_context().end_after_tools()
        handoff = {"from": owner, "to": target.id, "name": target.display_name, "reason": reason}
        return ToolResult(
            f"Transferred to {target.display_name}: it answers from now on.",
            attributes={HANDOFF_ATTRIBUTE: handoff},
        )

    target = _assistant(target_id)
    return tool(
        name=transfer_tool_name(target_id),
        description=(
            f"Hand this chat over to the assistant {_about(target)}. It answers the person "
            "from now on, starting with their last message."
        ),
        guidelines=[
            f"Use when the person needs {target.display_name} rather than you; call it "
            "alone, as the last thing you do.",
        ],
        snippet=f'{transfer_tool_name(target_id)}(reason="...")',
    )(transfer)


def _usable(ids: list[str], user: Any) -> set[str]:
    """Those of ``ids`` that name a registered assistant ``user`` may use (in a thread:
    a permission check may read the database)."""
    from agent_app.assistants import registry

    usable = set()
    for assistant_id in ids:
        assistant = registry.get(assistant_id)
        if assistant is not None and assistant.has_permission(user):
            usable.add(assistant_id)
    return usable


class TeamworkExtension(AgentExtension):
    """Offers an assistant's ``ask_<id>`` and ``transfer_to_<id>`` tools to each request
    (see the module docstring). Stateless between requests: one per assistant."""

    def __init__(self, assistant: Assistant, build: Builder) -> None:
        """``build`` makes a sub-run's agent (``agent_app.agents.factory.build_sub_agent``)."""
        self.owner = assistant.id
        self.build = build
        self.delegates = [d for d in _ids(assistant.delegates) if d != assistant.id]
        self.handoffs = [h for h in _ids(assistant.handoffs) if h != assistant.id]
        self._tools: dict[str, AgentTool] = {}

    def _tool(self, name: str, build: Any, other: str) -> AgentTool:
        found = self._tools.get(name)
        if found is None:
            found = self._tools[name] = build(self.owner, other, self.build)
        return found

    async def on_tool(self, context: AgentRunContext) -> None:
        busy, depth = running(self.owner)
        delegates = (
            [d for d in self.delegates if d not in busy]
            if depth < int(conf.ZETT_MAX_DELEGATION_DEPTH)
            else []
        )
        handoffs = self.handoffs if not CHAIN.get() else []
        wanted = delegates + handoffs
        if not wanted:
            return
        usable = await database_sync_to_async(_usable)(wanted, _person())
        for delegate in delegates:
            if delegate in usable:
                context.register_tool(self._tool(ask_tool_name(delegate), _ask_tool, delegate))
        for target in handoffs:
            if target in usable:
                context.register_tool(
                    self._tool(transfer_tool_name(target), _transfer_tool, target)
                )


def _ids(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def _person() -> Any:
    """The chat's person; an anonymous one outside a bound run (an agent run by hand)."""
    try:
        return current_user()
    except LookupError:
        from django.contrib.auth.models import AnonymousUser

        return AnonymousUser()
