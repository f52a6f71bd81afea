"""An offline model for the example (no API key): it reads the last message and calls the
shop's tools by keyword ("order 7", "refund 7", "report"), or asks Support about orders when
it may (``ask_support``), then reports the tool's result.
Its greeting names the assistant (the first words of the system prompt)."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator

from zett_agent.messages import AssistantMessage, SystemMessage, ToolCall, ToolMessage
from zett_agent.model import ModelRequest
from zett_agent.testing import ScriptedModel

_KEYWORDS = (
    (re.compile(r"refund (\d+)"), "refund_order"),
    (re.compile(r"order (\d+)"), "lookup_order"),
    (re.compile(r"report"), "sales_report"),
)


_ABOUT_ORDERS = re.compile(r"order|refund")


class ShopModel(ScriptedModel):
    def _reply(self, request: ModelRequest) -> AssistantMessage:
        last = request.messages[-1]
        if isinstance(last, ToolMessage):
            return AssistantMessage(content=f"Done. {last.content}")
        text = str(getattr(last, "content", ""))
        offered = {definition.name for definition in request.tools}
        for pattern, name in _KEYWORDS:
            found = pattern.search(text)
            if found and name in offered:
                arguments = {"number": int(found.group(1))} if found.groups() else {}
                call = ToolCall(f"call_{uuid.uuid4().hex[:12]}", name, arguments)
                return AssistantMessage(tool_calls=(call,))
        if "ask_support" in offered and _ABOUT_ORDERS.search(text):
            # An assistant that may ask Support passes an order question on.
            call = ToolCall(f"call_{uuid.uuid4().hex[:12]}", "ask_support", {"request": text})
            return AssistantMessage(tool_calls=(call,))
        system = next((m for m in request.messages if isinstance(m, SystemMessage)), None)
        who = str(system.content).split(".")[0] if system is not None else "Hello"
        return AssistantMessage(content=f"{who}. How can I help?")

    async def stream(self, request: ModelRequest) -> AsyncIterator:
        self.requests.append(request)
        for event in self.events_for(self._reply(request)):
            yield event
