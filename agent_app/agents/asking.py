"""``AppAskUserExtension``: the runtime's ``ask_user``, with answers stored as answers.

The runtime's ``AskUserExtension`` returns the reply's whole payload to the model, which a
transcript would then show as raw JSON (``{"tool_call_id": …, "answer": "call mom"}``).
Here the stored result is the answer itself, and the result's attributes say what was asked
and answered (``{"reply": {"kind": "ask_user", "question": …, "answer": …}}``), so a reloaded
page shows "You answered: call mom" exactly as it did live.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from zett_agent.extensions.ask_user import ASK_USER_TOOL_NAME, AskUserEvent, AskUserExtension
from zett_agent.extensions.external import ExternalEventExpired

if TYPE_CHECKING:
    from zett_agent.agent import AgentRunContext
    from zett_agent.messages import ToolCall
    from zett_agent.tools.base import ToolResult

__all__ = ["AppAskUserExtension"]


class AppAskUserExtension(AskUserExtension):
    """``ask_user`` whose result is the user's answer, recorded as such."""

    name = "AskUserExtension"

    async def after_tool(
        self,
        context: AgentRunContext,
        call: ToolCall,
        result: ToolResult,
        error: Exception | None,
    ) -> None:
        if call.name != ASK_USER_TOOL_NAME:
            return
        if isinstance(error, ExternalEventExpired):
            result.attributes["reply"] = {"kind": "ask_user", "expired": True}
            return
        if not result.success:
            return
        try:
            reply = json.loads(result.content) if isinstance(result.content, str) else None
        except ValueError:
            return
        if not isinstance(reply, dict) or "answer" not in reply:
            return
        answer = reply["answer"]
        result.content = answer if isinstance(answer, str) else json.dumps(answer)
        result.attributes["reply"] = {
            "kind": "ask_user",
            "question": call.arguments.get("question"),
            "answer": answer,
        }

    def question_payload(self, session_id: str, call: ToolCall) -> dict[str, Any] | None:
        """The ``ask_user`` payload for a call that never started; None if it is invalid."""
        try:
            arguments = self._tool.validate_arguments(call.arguments)
        except ValueError:
            return None
        options = arguments["options"]
        if (options is not None and not options) or (arguments["allow_multiple"] and not options):
            return None
        event = AskUserEvent(
            session_id=session_id,
            tool_call_id=call.id,
            question=arguments["question"],
            options=options,
            allow_multiple=arguments["allow_multiple"],
        )
        return dict(event.payload or {})
