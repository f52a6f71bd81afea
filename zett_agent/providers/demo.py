"""``DemoModel``: the offline model zett runs with when no provider is configured.

It needs no network and no key, and it is deterministic: the answer depends only on the
request. It still exercises the whole product, because it really uses the tools the app
offers: arithmetic goes through ``calculate``, the time through ``current_time``, a note
through ``save_note`` (which the app guards with an approval), and a request it cannot act on
without more detail ("calculate something", "save a note") goes through ``ask_user``.
Asked for code, a table or a long answer, it writes one (``demo_answers``), so the page's
highlighting, tables, streaming and Stop can be seen. Any other tool the agent offers (a
project's own) it calls when a message names it (``demo_tools``), arguments included.
Anything else gets a short explanation of what the demo can do (and which other tools it
would call) and how to configure a real provider with ``ZETT_MODEL``.

Each step reads the conversation since the last user message: no tool result yet means
"decide what to do with the request"; a tool result means "report it, or act on the
user's answer". Text is streamed word by word, ``pace`` seconds apart; the pause is an
``asyncio.sleep``, so closing the stream (or cancelling the request) stops it at once.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass

from zett_agent.messages import (
    AnyMessage,
    AssistantMessage,
    ContentPart,
    ImageBytesSource,
    ImageContent,
    TextContent,
    ToolCall,
    ToolMessage,
    UserMessage,
    content_text,
)
from zett_agent.model import (
    ModelEvent,
    ModelRequest,
    ModelResponse,
    ModelUsage,
    ToolCallDelta,
)
from zett_agent.providers.demo_answers import CODE_ANSWER, LONG_ANSWER, TABLE_ANSWER
from zett_agent.providers.demo_tools import named_tool_call, offered_tools_hint

__all__ = ["DemoModel"]

#: The tools the demo uses by what people ask; any other tool it calls when named.
OWN_TOOLS = frozenset({"calculate", "current_time", "save_note", "ask_user"})

NOTE_QUESTION = "What should the note say?"
EXPRESSION_QUESTION = "Which expression should I calculate? For example: 12 * (3 + 4)"
HELP_QUESTION = "What would you like to try?"
HELP_OPTIONS = ["Exact arithmetic", "The current time", "Saving a note"]
HELP_EXAMPLES = {
    "Exact arithmetic": "Ask me something like **what is 1/3 + 1/6?** and I will use the "
    "calculator tool, which computes with exact fractions.",
    "The current time": "Ask me **what time is it in Asia/Tokyo?** (any IANA time zone "
    "works, UTC when you name none).",
    "Saving a note": "Say **save a note: buy oat milk** and I will ask for your approval "
    "before the note is written to the database.",
}

OFFLINE_ANSWER = (
    "I am zett's **offline demo model**: I run without any network, so I can only show "
    "how the agent works. Try:\n\n"
    "- arithmetic: *what is 12 * (3 + 4) / 5?* (through the calculator tool)\n"
    "- the time: *what time is it in Europe/Paris?*\n"
    "- a note: *save a note: call the plumber* (you approve it first)\n"
    "- *show me a code example*, *compare the setups in a table* or *write a long answer*\n"
    "- *help*, and I will ask you what you want to try.\n\n"
    "To talk to a real model, set `ZETT_MODEL` before starting the server, e.g. "
    "`ZETT_MODEL=openai:gpt-4o-mini` with `OPENAI_API_KEY`, or "
    "`ZETT_MODEL=anthropic:claude-sonnet-4-5` with `ANTHROPIC_API_KEY`."
)

_NOTE_INTENT = re.compile(r"\b(note|notes|remember|jot)\b", re.IGNORECASE)
_NOTE_TEXT = re.compile(
    r"(?:note|remember|jot(?:\s+down)?)(?:\s+(?:that|this|down))?\s*[:,-]?\s*(.+)$",
    re.IGNORECASE | re.DOTALL,
)
_TIME_INTENT = re.compile(r"\b(time|date|today|clock)\b", re.IGNORECASE)
_TIME_ZONE = re.compile(r"\b([A-Z][A-Za-z_]+(?:/[A-Za-z_\-]+)+|UTC)\b")
_CALC_INTENT = re.compile(r"\b(calculate|compute|calc|math|arithmetic|sum)\b", re.IGNORECASE)
# Only an explicit request for help asks back; a greeting is answered at once, so a first
# "hello" on a fresh install (or from a script) ends its run instead of waiting for a reply.
_CODE_INTENT = re.compile(r"\b(code|snippet|function|program|python|javascript)\b", re.I)
_TABLE_INTENT = re.compile(r"\b(table|compare|comparison)\b", re.IGNORECASE)
_LONG_INTENT = re.compile(r"\b(long|story|essay|in detail|streaming)\b", re.IGNORECASE)
_HELP_INTENT = re.compile(r"^\W*help\b|\bwhat can you do\b", re.IGNORECASE)
_WORD_OPERATORS = [
    (re.compile(r"\bplus\b", re.IGNORECASE), "+"),
    (re.compile(r"\bminus\b", re.IGNORECASE), "-"),
    (re.compile(r"\b(times|multiplied by)\b", re.IGNORECASE), "*"),
    (re.compile(r"\bdivided by\b", re.IGNORECASE), "/"),
]
_EXPRESSION = re.compile(r"[-+(]*\s*[\d.]+(?:\s*(?:\*\*|[-+*/%()])+\s*\(*\s*[\d.]+\)*)+\)*")
# A failed tool's result starts with its error's type ("ApprovalDenied: ..."): for a
# program, not for the person reading the answer.
_ERROR_NAME = re.compile(r"^[A-Z][A-Za-z0-9_]*: ")
_NOTE_WORDS = re.compile(r"^\s*(?:save|add|make|take|write|create)?\s*(?:a|the|this)?\s*$", re.I)


@dataclass(frozen=True, slots=True)
class _Step:
    """What the demo does next: say ``text``, then maybe call one tool."""

    text: str
    call: tuple[str, dict] | None = None


class DemoModel:
    """A deterministic, offline ``AgentModel`` that demonstrates tools, questions, approvals."""

    provider = "demo"
    model = "zett-demo"
    #: It takes image parts, and says what it was given (it cannot look at them).
    accepts_images = True

    def __init__(self, *, pace: float = 0.0) -> None:
        if not isinstance(pace, int | float) or pace < 0:
            raise ValueError(f"pace must be a number of seconds >= 0, got {pace!r}")
        #: Seconds between two streamed words; 0 streams without pausing (tests).
        self.pace = float(pace)

    def __repr__(self) -> str:
        return f"DemoModel(pace={self.pace})"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        step = _decide(request)
        call = None
        if step.call is not None:
            name, arguments = step.call
            call = ToolCall(id=_next_call_id(request.messages), name=name, arguments=arguments)
        for index, word in enumerate(re.findall(r"\s*\S+", step.text)):
            if index and self.pace:
                await asyncio.sleep(self.pace)
            yield ModelEvent.text(word)
        if call is not None:
            if self.pace:
                await asyncio.sleep(self.pace)
            yield ModelEvent.tool_call(
                ToolCallDelta(
                    index=0, id=call.id, name=call.name, arguments_delta=json.dumps(call.arguments)
                )
            )
        message = AssistantMessage(
            content=step.text,
            tool_calls=(call,) if call else (),
            provider=self.provider,
            model=self.model,
        )
        yield ModelEvent.completed(
            ModelResponse(
                message,
                finish_reason="tool_calls" if call else "stop",
                usage=ModelUsage(
                    input_tokens=sum(_word_count(m) for m in request.messages),
                    output_tokens=len(step.text.split()),
                ),
            )
        )


def _decide(request: ModelRequest) -> _Step:
    messages = request.messages
    tools = {definition.name for definition in request.tools}
    start = max((i for i, m in enumerate(messages) if isinstance(m, UserMessage)), default=-1)
    if start < 0:
        return _Step(OFFLINE_ANSWER)
    text = content_text(messages[start].content).strip()
    turn = messages[start + 1 :]
    if turn and isinstance(turn[-1], ToolMessage):
        result = turn[-1]
        call = _find_call(turn, result.tool_call_id)
        return _after_tool(result, call, tools)
    described = _attachments_described(messages[start].content)
    if described is not None:
        return _Step(described)
    named = named_tool_call(text, request.tools, skip=OWN_TOOLS)
    if named is not None:
        return _Step(f"Calling `{named[0]}`.", named)
    step = _first_step(text, tools)
    if step.text == OFFLINE_ANSWER:
        return _Step(OFFLINE_ANSWER + offered_tools_hint(request.tools, skip=OWN_TOOLS))
    return step


#: How an attached file is introduced in a message (``agent_app.attachments.content``).
_ATTACHED = re.compile(r"^\[Attached (image|file): (.+) \(([^,()]+), attachment id [^)]+\)")


def _attachments_described(content: str | list[ContentPart]) -> str | None:
    """What the demo says about the files of a message, or None when it has none."""
    if isinstance(content, str):
        return None
    lines: list[str] = []
    for part in content:
        if isinstance(part, ImageContent) and isinstance(part.source, ImageBytesSource):
            if lines:
                lines[-1] += f", {_size(len(part.source.data))} of image data"
            continue
        if not isinstance(part, TextContent):
            continue
        head, _, body = part.text.partition("\n")
        found = _ATTACHED.match(head)
        if found is None:
            continue
        kind, name, media_type = found.groups()
        line = f"- **{name}**: {'an image' if kind == 'image' else 'a file'} ({media_type})"
        words = body.rsplit("\n[", 1)[0].split() if body else []
        if words:
            line += f", {len(words)} words of text, starting “{' '.join(words[:8])}…”"
        lines.append(line)
    if not lines:
        return None
    count, them = ("one file", "it") if len(lines) == 1 else (f"{len(lines)} files", "them")
    return (
        f"You attached {count}. I am the offline demo, so I cannot look inside {them}, "
        "but here is what I was given:\n\n" + "\n".join(lines)
    )


def _size(size: int) -> str:
    return f"{size} bytes" if size < 1024 else f"{size / 1024:.1f} KB"


def _first_step(text: str, tools: set[str]) -> _Step:
    if _NOTE_INTENT.search(text):
        return _note_step(_note_text(text), tools)
    expression = _expression(text)
    if expression is not None:
        return _calc_step(expression, tools)
    if _TIME_INTENT.search(text):
        if "current_time" not in tools:
            return _missing("current_time")
        zone = _TIME_ZONE.search(text)
        arguments = {"timezone": zone.group(1)} if zone else {}
        where = f" in {zone.group(1)}" if zone else " (UTC)"
        return _Step(f"Let me look at the clock{where}.", ("current_time", arguments))
    if _CALC_INTENT.search(text):
        return _ask(EXPRESSION_QUESTION, tools, "I can calculate that, but I need the numbers.")
    for intent, answer in _WRITTEN_ANSWERS:
        if intent.search(text):
            return _Step(answer)
    if _HELP_INTENT.search(text):
        return _ask(
            HELP_QUESTION, tools, "I am the offline demo, happy to show you around.", HELP_OPTIONS
        )
    return _Step(OFFLINE_ANSWER)


#: Requests answered with a written text, in the order they are tried.
_WRITTEN_ANSWERS = (
    (_CODE_INTENT, CODE_ANSWER),
    (_TABLE_INTENT, TABLE_ANSWER),
    (_LONG_INTENT, LONG_ANSWER),
)


def _after_tool(result: ToolMessage, call: ToolCall | None, tools: set[str]) -> _Step:
    output = content_text(result.content).strip()
    arguments = call.arguments if call else {}
    if result.name == "ask_user":
        if not result.success:
            return _Step(f"I could not ask you: {output}")
        return _after_answer(arguments.get("question"), _answer(output), tools)
    if not result.success:
        reason = _ERROR_NAME.sub("", output)
        if result.name == "save_note":
            if "denied" in reason:
                return _Step("I did not save the note. You denied it, so nothing was written.")
            return _Step(f"I did not save the note. {reason}")
        return _Step(f"The {result.name} tool failed: {reason}")
    if result.name == "calculate":
        return _Step(f"`{arguments.get('expression', '?')}` = **{output}**")
    if result.name == "current_time":
        return _Step(f"It is now {output}.")
    if result.name == "save_note":
        return _Step(f"Done. {output}. You can find it in the admin under *Notes*.")
    return _Step(f"The {result.name} tool returned: {output}")


def _after_answer(question: object, answer: str, tools: set[str]) -> _Step:
    if not answer:
        return _Step("I did not get an answer, so I will leave it there.")
    if question == NOTE_QUESTION:
        return _note_step(answer, tools)
    if question == EXPRESSION_QUESTION:
        expression = _expression(answer)
        if expression is None:
            return _Step(f"`{answer}` does not look like arithmetic, so I will leave it there.")
        return _calc_step(expression, tools)
    if question == HELP_QUESTION:
        return _Step(HELP_EXAMPLES.get(answer, OFFLINE_ANSWER))
    return _Step(f"You answered: {answer}")


def _note_step(note: str, tools: set[str]) -> _Step:
    if not note:
        return _ask(NOTE_QUESTION, tools, "Sure, I can save a note.")
    if "save_note" not in tools:
        return _missing("save_note")
    words = note.split()
    title = " ".join(words[:6]) + ("…" if len(words) > 6 else "")
    return _Step(
        "I will save this note once you approve it.",
        ("save_note", {"title": title[:200], "text": note}),
    )


def _calc_step(expression: str, tools: set[str]) -> _Step:
    if "calculate" not in tools:
        return _missing("calculate")
    return _Step("Let me calculate that exactly.", ("calculate", {"expression": expression}))


def _ask(question: str, tools: set[str], intro: str, options: list[str] | None = None) -> _Step:
    if "ask_user" not in tools:
        return _Step(f"{intro} {question}")
    arguments: dict = {"question": question}
    if options:
        arguments["options"] = list(options)
    return _Step(intro, ("ask_user", arguments))


def _missing(tool_name: str) -> _Step:
    return _Step(f"I would use the `{tool_name}` tool for that, but this agent does not offer it.")


def _note_text(text: str) -> str:
    match = _NOTE_TEXT.search(text)
    if match is None:
        return ""
    note = match.group(1).strip()
    return "" if _NOTE_WORDS.match(note) or note.lower() in {"a note", "note"} else note


def _expression(text: str) -> str | None:
    for pattern, symbol in _WORD_OPERATORS:
        text = pattern.sub(symbol, text)
    text = text.replace("\u00d7", "*").replace("\u00f7", "/").replace("^", "**")
    candidates = [m.group(0).strip() for m in _EXPRESSION.finditer(text)]
    return max(candidates, key=len) if candidates else None


def _answer(output: str) -> str:
    """The user's answer inside an ``ask_user`` result (the reply payload, as JSON)."""
    try:
        payload = json.loads(output)
    except ValueError:
        return output
    if not isinstance(payload, dict):
        return str(payload)
    for key in ("answer", "answers", "response", "text", "value"):
        value = payload.get(key)
        if isinstance(value, list):
            return ", ".join(str(item) for item in value)
        if value is not None:
            return str(value).strip()
    return ""


def _find_call(messages: tuple[AnyMessage, ...], call_id: str) -> ToolCall | None:
    for message in messages:
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls:
                if call.id == call_id:
                    return call
    return None


def _next_call_id(messages: tuple[AnyMessage, ...]) -> str:
    count = sum(len(m.tool_calls) for m in messages if isinstance(m, AssistantMessage))
    return f"demo_call_{count + 1}"


def _word_count(message: AnyMessage) -> int:
    content = getattr(message, "content", "")
    return len(content_text(content).split()) if content else 0
