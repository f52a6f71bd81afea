"""The scripted LLM of the browser test's second server, for what the demo model never does.

The server imports it through the ``ZETT_MODEL`` seam, naming the factory
``tests.app.browser.browser_model:browser_script_model`` (one model per live session). The answer
depends only on the latest user message (and, for ``fail once``, on how often the session
asked), so any session and any test order get the same stream:

- ``cut off``   → reasoning, then text that stops at the length limit (``MODEL_STOPPED``);
- ``fail``      → the model raises, so the run fails (``run_failed``);
- ``fail once`` → fails the first time a session asks, answers the second time;
- ``markdown``  → a reply using headings, lists, code, a table and a link;
- ``code``      → fenced code in Python and HTML (with markup that must stay text) and one
  block without a language;
- ``stall``     → streams an unfinished emphasis (``*what is 12``), then waits until the
  run is cancelled or steered (or the server is killed);
- ``say <text>`` → answers ``<text>`` (a steer that says how the answer goes on);
- ``note <text>`` → calls ``save_note`` with ``<text>`` (the app asks for approval), then
  answers with the tool's result: ``Done: …``;
- ``highlight <id>`` → calls the host page's ``highlight_product`` with ``<id>``, then
  answers with what the page gave back: ``The page said: …`` (or ``The page failed: …``);
- ``ask``       → asks ``Which colour?`` (Red / Blue), then answers ``You chose: …``;
- ``xss …``     → the XSS corpus (``XSS``) in every channel a model controls: reasoning, an
  unknown tool's name, tool arguments and results, an ``ask_user`` question and options,
  a ``save_note`` approval (its title and text end up in the admin), then a Markdown answer;
- ``maths``     → inline and display formulas, one KaTeX must refuse (``\\href``) and one
  it cannot read, then prices that must stay text (``MATHS_REPLY``);
- ``prices``    → prices in dollars and no maths (``PRICES_REPLY``);
- anything else → one short sentence.

Every model call reports the same token usage (``USAGE``: 1,234 tokens).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

from zett_agent.messages import AssistantMessage, ToolCall, ToolMessage, UserMessage, content_text
from zett_agent.model import (
    ModelEvent,
    ModelRequest,
    ModelResponse,
    ModelUsage,
    StopInfo,
    StopReason,
)
from zett_agent.testing import ScriptedModel

REASONING = "The user wants a long answer; I only have a few tokens left."
CUT_OFF_TEXT = "Here is the first half of a long answer"
FAILURE = "The model service is unavailable"
PLAIN_REPLY = "A scripted reply."
RECOVERED_REPLY = "Recovered on the second try."
STALLED_TEXT = "Try *what is 12"
USAGE = ModelUsage(input_tokens=1200, output_tokens=34)
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
PRICES_REPLY = "Tea is $5 and coffee is $10, or US$5-$10 for both."
MATHS_REPLY = (
    "Euler: $e^{i\\pi} + 1 = 0$ and $a_1 * b_2$.\n\n"
    "$$\n\\int_0^1 x^2\\,dx = \\frac{1}{3}\n$$\n\n"
    "Refused: $\\href{javascript:window.zettInjected=5}{click}$; "
    "unreadable: $\\frac{1}{$.\n\n" + PRICES_REPLY
)
PYTHON_CODE = 'def greet(name):\n    return f"Hello, {name}"  # a comment\n'
HTML_CODE = '<script>window.zettInjected = 1</script>\n<img src=x onerror="zettInjected=2">\n'
PLAIN_CODE = "just text, no language\n"
CODE_REPLY = (
    f"Python:\n\n```python\n{PYTHON_CODE}```\n\n"
    f"HTML:\n\n```html\n{HTML_CODE}```\n\n"
    f"Plain:\n\n```\n{PLAIN_CODE}```\n"
)
PROSE_REPLY = """## Shopping list

1. **Oat milk**, two cartons
2. Coffee, *whole beans*

| item | count |
|------|-------|
| cups | 2     |

See [the docs](https://example.org/coffee).
"""
PYTHON_REPLY = f"In Python:\n\n```py\n{PYTHON_CODE}```\n"


#: Markup that runs script if it is ever parsed as HTML: each sets ``window.zettInjected``.
XSS = [
    '<img src=x onerror="window.zettInjected=1">',
    "<script>window.zettInjected=2</script>",
    '<svg onload="window.zettInjected=3"></svg>',
    '"><iframe srcdoc="<script>parent.zettInjected=4</script>"></iframe>',
    '<a href="javascript:window.zettInjected=5">click</a>',
    "[click me](javascript:window.zettInjected=6)",
    '<details open ontoggle="window.zettInjected=7">',
    "{{7*7}} ${window.zettInjected=8}",
]
XSS_TEXT = " ".join(XSS)
XSS_MARKDOWN = "## Heading " + XSS[0] + "\n\n" + "\n\n".join(XSS) + "\n\n`" + XSS[1] + "`\n"


def _xss_turn(request: ModelRequest) -> AssistantMessage:
    """The next step of the XSS run: tools and a question, then an approval, then an answer."""
    calls = [c for m in request.messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
    if not calls:
        return AssistantMessage(
            content=XSS_TEXT,
            reasoning=XSS_TEXT,
            tool_calls=(
                ToolCall("xss-1", "calculate", {"expression": XSS[0]}),
                ToolCall("xss-2", XSS[2], {"payload": XSS_TEXT}),
                ToolCall("xss-3", "ask_user", {"question": XSS_TEXT, "options": [XSS[0], XSS[4]]}),
            ),
        )
    if not any(call.name == "save_note" for call in calls):
        return AssistantMessage(
            tool_calls=(ToolCall("xss-4", "save_note", {"title": XSS[0], "text": XSS_TEXT}),)
        )
    return AssistantMessage(content=XSS_MARKDOWN, reasoning=XSS[3])


class BrowserScriptModel:
    """Answers by keyword, streaming word by word like a real provider."""

    def __init__(self) -> None:
        self.streams = ScriptedModel(usage=USAGE)
        self.asked: dict[str, int] = {}

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        words = content_text(_last_user_message(request).content).strip()
        if words.lower().startswith("note "):
            for event in self.streams.events_for(_note_turn(request, words[5:].strip())):
                yield event
            return
        said = words.lower()
        if said.startswith("highlight ") or said == "ask":
            turn = _tool_turn(request, words)
            for event in self.streams.events_for(turn):
                yield event
            return
        if said.startswith("xss"):
            for event in self.streams.events_for(_xss_turn(request)):
                yield event
            return
        self.asked[said] = self.asked.get(said, 0) + 1
        if said == "fail" or (said == "fail once" and self.asked[said] == 1):
            raise RuntimeError(FAILURE)
        if said == "cut off":
            message = AssistantMessage(content=CUT_OFF_TEXT, reasoning=REASONING)
            *deltas, _ = self.streams.events_for(message)
            for event in deltas:
                yield event
            stop = StopInfo(StopReason.MAX_TOKENS, "limit of 12 tokens")
            yield ModelEvent.completed(ModelResponse(message, "length", USAGE, stop=stop))
            return
        if said == "stall":
            *deltas, _ = self.streams.events_for(AssistantMessage(content=STALLED_TEXT))
            for event in deltas:
                yield event
            await asyncio.Event().wait()  # until the run is cancelled
        if said.startswith("say "):
            for event in self.streams.events_for(AssistantMessage(content=words[4:].strip())):
                yield event
            return
        reply = {
            "markdown": MARKDOWN_REPLY,
            "code": CODE_REPLY,
            "maths": MATHS_REPLY,
            "prices": PRICES_REPLY,
            "python": PYTHON_REPLY,
            "prose": PROSE_REPLY,
            "fail once": RECOVERED_REPLY,
        }.get(said, PLAIN_REPLY)
        for event in self.streams.events_for(AssistantMessage(content=reply)):
            yield event


def _note_turn(request: ModelRequest, text: str) -> AssistantMessage:
    """Call ``save_note`` first; once its result is in, say what it was."""
    last = request.messages[-1]
    if isinstance(last, ToolMessage):
        return AssistantMessage(content=f"Done: {content_text(last.content)}")
    arguments = {"title": "Scripted", "text": text}
    call = ToolCall(f"note_{uuid.uuid4().hex[:12]}", "save_note", arguments)
    return AssistantMessage(content="Saving it.", tool_calls=[call])


def _tool_turn(request: ModelRequest, words: str) -> AssistantMessage:
    """``highlight <id>`` and ``ask``: call the tool, then say what came back."""
    last = request.messages[-1]
    if isinstance(last, ToolMessage):
        said = content_text(last.content)
        if words == "ask":
            return AssistantMessage(content=f"You chose: {said}")
        verdict = "said" if last.success else "failed"
        return AssistantMessage(content=f"The page {verdict}: {said}")
    call_id = f"call_{uuid.uuid4().hex[:12]}"
    if words == "ask":
        arguments = {"question": "Which colour?", "options": ["Red", "Blue"]}
        return AssistantMessage(tool_calls=[ToolCall(call_id, "ask_user", arguments)])
    arguments = {"product_id": words.split(" ", 1)[1].strip()}
    return AssistantMessage(tool_calls=[ToolCall(call_id, "highlight_product", arguments)])


def _last_user_message(request: ModelRequest) -> UserMessage:
    return next(m for m in reversed(request.messages) if isinstance(m, UserMessage))


def browser_script_model() -> BrowserScriptModel:
    """The ``ZETT_MODEL`` factory the browser test's scripted server names."""
    return BrowserScriptModel()
