"""The scripted LLM of the browser test's second server, for what the demo model never does.

The server imports it through the ``ZETT_MODEL`` seam, naming the factory
``tests.app.browser_model:browser_script_model`` (one model per live session). The answer
depends only on the latest user message, so any session and any test order get the same
stream:

- ``cut off``  → reasoning, then text that stops at the length limit (``MODEL_STOPPED``);
- ``fail``     → the model raises, so the run fails (``run_failed``);
- ``markdown`` → a reply using headings, lists, code, a table and a link;
- anything else → one short sentence.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from zett_agent.messages import AssistantMessage, UserMessage, content_text
from zett_agent.model import ModelEvent, ModelRequest, ModelResponse, StopInfo, StopReason
from zett_agent.testing import ScriptedModel

REASONING = "The user wants a long answer; I only have a few tokens left."
CUT_OFF_TEXT = "Here is the first half of a long answer"
FAILURE = "The model service is unavailable"
PLAIN_REPLY = "A scripted reply."
MARKDOWN_REPLY = """## Shopping list

1. Oat milk
2. Coffee

Run `make coffee`:

```
brew --strong
```

| item | count |
|------|-------|
| cups | 2     |

See [the docs](https://example.org/coffee).
"""


class BrowserScriptModel:
    """Answers by keyword, streaming word by word like a real provider."""

    def __init__(self) -> None:
        self.streams = ScriptedModel()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        said = content_text(_last_user_message(request).content).strip().lower()
        if said == "fail":
            raise RuntimeError(FAILURE)
        if said == "cut off":
            message = AssistantMessage(content=CUT_OFF_TEXT, reasoning=REASONING)
            *deltas, _ = self.streams.events_for(message)
            for event in deltas:
                yield event
            stop = StopInfo(StopReason.MAX_TOKENS, "limit of 12 tokens")
            yield ModelEvent.completed(ModelResponse(message, "length", stop=stop))
            return
        reply = MARKDOWN_REPLY if said == "markdown" else PLAIN_REPLY
        for event in self.streams.events_for(AssistantMessage(content=reply)):
            yield event


def _last_user_message(request: ModelRequest) -> UserMessage:
    return next(m for m in reversed(request.messages) if isinstance(m, UserMessage))


def browser_script_model() -> BrowserScriptModel:
    """The ``ZETT_MODEL`` factory the browser test's scripted server names."""
    return BrowserScriptModel()
