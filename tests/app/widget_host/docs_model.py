"""The model of the host site's ``support`` assistant, which the examples of
docs/client.md talk to (``test_browser_client_docs``): it answers the examples' prompts
the way a real model would, with the tools they show.

- "Where are the red shoes?" → calls the page's ``highlight_product`` (``p-7``), then
  says what the page answered: ``They are highlighted: …``;
- "Which colour should I pick?" → asks ``Which colour?`` (Red / Blue), then ``You chose
  …``;
- "Please save a note: buy milk" → calls ``save_note`` (which needs approval), then
  ``Saved: …`` (or ``Not saved: …`` when it was denied);
- anything else → ``Hello from support.``
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

from zett_agent.messages import AssistantMessage, ToolCall, ToolMessage, UserMessage, content_text
from zett_agent.model import ModelEvent, ModelRequest
from zett_agent.testing import ScriptedModel

SHOES = "where are the red shoes?"
COLOUR = "which colour should i pick?"
NOTE = "please save a note: "


class DocsModel:
    def __init__(self) -> None:
        self.streams = ScriptedModel()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        for event in self.streams.events_for(_turn(request)):
            yield event


def _turn(request: ModelRequest) -> AssistantMessage:
    asked = next(m for m in reversed(request.messages) if isinstance(m, UserMessage))
    said = content_text(asked.content).strip().lower()
    last = request.messages[-1]
    if isinstance(last, ToolMessage):
        result = content_text(last.content)
        if said == COLOUR:
            return AssistantMessage(content=f"You chose {result}.")
        if said.startswith(NOTE):
            verdict = "Saved" if last.success else "Not saved"
            return AssistantMessage(content=f"{verdict}: {result}")
        return AssistantMessage(content=f"They are highlighted: {result}")
    call_id = f"call_{uuid.uuid4().hex[:12]}"
    if said == SHOES:
        call = ToolCall(call_id, "highlight_product", {"product_id": "p-7"})
        return AssistantMessage(content="Let me show you.", tool_calls=[call])
    if said.startswith(NOTE):
        arguments = {"title": "Note", "text": content_text(asked.content).strip()[len(NOTE) :]}
        return AssistantMessage(tool_calls=[ToolCall(call_id, "save_note", arguments)])
    if said == COLOUR:
        arguments = {"question": "Which colour?", "options": ["Red", "Blue"]}
        return AssistantMessage(tool_calls=[ToolCall(call_id, "ask_user", arguments)])
    return AssistantMessage(content="Hello from support.")
