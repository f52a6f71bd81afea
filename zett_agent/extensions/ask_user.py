"""``AskUserExtension``: a tool with which the model asks the user a question and waits.

The model calls ``ask_user(question, options=None, allow_multiple=False)``. Before the tool
runs, the extension validates the arguments (invalid ones, a blank question included, never
pause: the tool then fails with the validation error), emits an ``AskUserEvent`` and waits
for an ``ask_user_response`` external event whose ``tool_call_id`` matches. The reply's
payload is the tool's result.

``AskUserExtension(timeout=seconds)`` gives every question a deadline (see
``zett_agent.extensions.external``): the event's payload then carries ``expires_at`` (ISO
8601 UTC), and a question nobody answers in time fails the tool with "Nobody answered …";
the request goes on. Without a deadline the payload has no ``expires_at`` key at all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from zett_agent.events import AgentEvent, AgentEventType
from zett_agent.extensions.external import ExternalEventExtension, utc_iso
from zett_agent.tools.base import AgentTool, current_run_context, tool

if TYPE_CHECKING:
    from zett_agent.agent import AgentRunContext
    from zett_agent.messages import ToolCall

__all__ = ["ASK_USER_RESPONSE_EVENT", "ASK_USER_TOOL_NAME", "AskUserEvent", "AskUserExtension"]

ASK_USER_TOOL_NAME = "ask_user"
ASK_USER_RESPONSE_EVENT = "ask_user_response"


def _check_arguments(question: str, options: list[str] | None, allow_multiple: bool) -> None:
    if not question.strip():
        raise ValueError("question cannot be blank: ask something")
    if options is not None and not options:
        raise ValueError("options must list at least one choice, or be omitted")
    if allow_multiple and not options:
        raise ValueError("allow_multiple needs options to choose from")


class AskUserEvent(AgentEvent):
    """CUSTOM event ``ask_user``: show ``question`` and reply with ``response_event``."""

    def __init__(
        self,
        *,
        session_id: str,
        tool_call_id: str,
        question: str,
        options: list[str] | None = None,
        allow_multiple: bool = False,
        response_event: str = ASK_USER_RESPONSE_EVENT,
        expires_at: str | None = None,
    ) -> None:
        payload: dict[str, Any] = {
            "session_id": session_id,
            "tool_call_id": tool_call_id,
            "question": question,
            "options": list(options) if options is not None else None,
            "allow_multiple": allow_multiple,
            "response_event": response_event,
        }
        if expires_at is not None:
            payload["expires_at"] = expires_at
        super().__init__(
            AgentEventType.CUSTOM, session_id, name=ASK_USER_TOOL_NAME, payload=payload
        )

    @property
    def tool_call_id(self) -> str:
        return self.payload["tool_call_id"]  # type: ignore[index]

    @property
    def question(self) -> str:
        return self.payload["question"]  # type: ignore[index]

    @property
    def options(self) -> list[str] | None:
        return self.payload["options"]  # type: ignore[index]

    @property
    def allow_multiple(self) -> bool:
        return self.payload["allow_multiple"]  # type: ignore[index]

    @property
    def response_event(self) -> str:
        return self.payload["response_event"]  # type: ignore[index]

    @property
    def expires_at(self) -> str | None:
        """The question's deadline (ISO 8601 UTC), or None when it has none."""
        return self.payload.get("expires_at")  # type: ignore[union-attr]


class AskUserExtension(ExternalEventExtension):
    """Registers ``ask_user`` and pauses it until the user's reply (or the deadline) arrives.

    ``timeout``: seconds each question may wait; None or 0 = no deadline.
    """

    def __init__(self, *, timeout: float | None = None) -> None:
        super().__init__(
            response_event_name=ASK_USER_RESPONSE_EVENT,
            correlation_field="tool_call_id",
            timeout=timeout,
        )
        self._tool = self._build_tool()

    def _build_tool(self) -> AgentTool:
        extension = self

        @tool(name=ASK_USER_TOOL_NAME)
        async def ask_user(
            question: str, options: list[str] | None = None, allow_multiple: bool = False
        ) -> dict[str, Any]:
            """Ask the user a question and wait for the answer.

            Args:
                question: The question, in the user's language.
                options: Choices to offer; omit for a free-text answer.
                allow_multiple: Whether the user may pick several options.

            Snippet:
                ask_user(question="Which city?", options=["Paris", "Rome"])

            Guidelines:
                - Ask only when the request is ambiguous and the answer changes what you do.
                - Ask one short, specific question at a time.
            """
            _check_arguments(question, options, allow_multiple)
            context = current_run_context()
            return extension._take_external_event(context).payload

        return ask_user

    async def on_tool(self, context: AgentRunContext) -> None:
        context.register_tool(self._tool)

    async def before_tool(self, context: AgentRunContext, call: ToolCall) -> None:
        if call.name != ASK_USER_TOOL_NAME or context.tools.get(call.name) is not self._tool:
            return
        try:
            arguments = self._tool.validate_arguments(call.arguments)
        except ValueError:
            return  # the tool fails with the validation error; never pause for bad input
        try:
            _check_arguments(
                arguments["question"], arguments["options"], arguments["allow_multiple"]
            )
        except ValueError:
            return
        async with self._wait_for_external_event(context, call.id):
            expires_at = self._wait_expires_at(context, call.id)
            await context.emit(
                AskUserEvent(
                    session_id=context.session_id,
                    tool_call_id=call.id,
                    question=arguments["question"],
                    options=arguments["options"],
                    allow_multiple=arguments["allow_multiple"],
                    expires_at=utc_iso(expires_at) if expires_at is not None else None,
                )
            )
