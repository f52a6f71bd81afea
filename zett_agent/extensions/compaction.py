"""``CompactionExtension``: keeps a long conversation inside the model's context window.

When the estimated size of the context exceeds ``max_tokens`` (checked in ``before_model``,
before every primary model call), or whenever ``Agent.compact`` asks (``on_compact``), older
dialogue is summarised by a model and replaced by one checkpoint message::

    [system messages] [older turns ...............] [recent whole user turns]
    [system messages] [checkpoint: CompactedMessage] [recent whole user turns]

A user turn starts at a ``UserMessage`` or ``AgentMessage`` and runs until the next one, so
a tool call always stays with its results. The recent window is a token budget: the newest
turn is always kept, and older turns are added, newest first, until the kept turns reach
``keep_recent_tokens`` (the turn that reaches it is kept whole). System messages are never
summarised: those among the older turns stay, in order, before the checkpoint. The
checkpoint is a ``CompactedMessage`` (an ``AgentMessage``: providers see it as a user turn)
whose content starts with ``CHECKPOINT_HEADER`` and whose ``attributes`` hold
``{"compaction": True}``. A later compaction summarises an earlier checkpoint together with
the turns after it.

A pass emits ``COMPACTION_STARTED`` (which moves the request to COMPACTING), mirrors the
summary model's deltas as ``COMPACTION_TEXT_DELTA`` / ``COMPACTION_REASONING_DELTA``, then
``COMPACTION_COMPLETED`` (which moves it back to READY). When applied, the context is
replaced without re-publishing kept messages, and a ``CompactionEvent`` (ranges, summary
text, the messages themselves) is published to every extension first, so memory and
persistence can swap their stored history before the UI hears of it. A summary model that
calls a tool (a streamed tool call, or tool calls in its response) is an
``AgentProtocolError``: a summary is text, and nothing is replaced.

Choices where the contract (docs/runtime.md) is silent:

- nothing to compact (no message older than the kept turns, or only an earlier
  checkpoint) means no summary call and no event at all; ``Agent.compact`` returns None;
- a summary is not applied (``COMPACTION_COMPLETED(applied=False)``, context untouched)
  when it is blank, when the summary model stopped abnormally (``ModelResponse.stop``:
  truncated or filtered), or when the checkpoint is not smaller in tokens than the
  messages it would replace; automatic compaction then does not retry the very same
  messages within that request, so a long tool loop does not pay a summary call per turn;
- the summary model is the ``model`` given to the extension, else ``context.model`` (the
  request's model, or the one given to ``Agent.compact``); it is called directly, not
  through the ``on_model_request`` onion, which wraps primary model calls only;
- a summary model failure fails the request like any hook error;
- ``count_tokens`` takes a sequence of messages and returns their token count; it is
  called once on the whole context and once per user turn. The default uses tiktoken's
  ``o200k_base`` when tiktoken is installed and that encoding is already in its cache
  (it is never downloaded), else ``estimate_tokens``, an offline estimate.

Cancellation: the summary stream is read inside ``try/finally`` and closed (``aclose``) on
every exit, so cancelling the request mid-summary (closing the event iterator, or
cancelling the consuming task) stops the summary model at once. The ``CancelledError``
propagates with the phase still COMPACTING, and the runtime moves it to CANCELLED; the
context is replaced only after the summary is complete, so a cancelled pass changes nothing.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING, Any, TypeAlias

from zett_agent.events import AgentEvent, AgentEventType
from zett_agent.exceptions import AgentProtocolError
from zett_agent.extensions.base import AgentExtension
from zett_agent.extensions.events import CompactionEvent, PhaseTransitionEvent
from zett_agent.messages import (
    AgentMessage,
    AnyMessage,
    AssistantMessage,
    CompactedMessage,
    ImageContent,
    SystemMessage,
    TextContent,
    ToolMessage,
    UserMessage,
    content_text,
)
from zett_agent.model import AgentModel, ModelEventType, ModelRequest, ModelResponse

if TYPE_CHECKING:
    from zett_agent._context import AgentRunContext
    from zett_agent.extensions.events import ExtensionEvent

__all__ = [
    "CHECKPOINT_HEADER",
    "SUMMARY_INSTRUCTIONS",
    "CompactedMessage",
    "CompactionExtension",
    "TokenCounter",
    "estimate_tokens",
]

E = AgentEventType

TokenCounter: TypeAlias = Callable[[Sequence[AnyMessage]], int]

#: Characters per token of the offline estimate (English prose and code average ~4).
CHARS_PER_TOKEN = 4
#: Tokens a provider spends framing each message (role markers, separators).
MESSAGE_OVERHEAD_TOKENS = 4
#: Flat cost of one image; providers charge roughly 500-1,600 tokens for a typical picture.
IMAGE_TOKENS = 1_000

#: The system instruction of the summary request.
SUMMARY_INSTRUCTIONS = """\
You compress the earlier part of a conversation between a user and an AI assistant, so that \
the assistant can carry on without it. Write a concise summary that keeps:
- the user's goals, requests, preferences and constraints;
- decisions taken and facts learned, including what tool calls found out;
- work still open and questions still unanswered.
Keep names, numbers, paths and identifiers exact. Write in the language of the \
conversation. Reply with the summary only."""

#: First line of every checkpoint, so the primary model knows what it is reading.
CHECKPOINT_HEADER = "[Summary of the earlier conversation, compacted to save context]"

_TIKTOKEN_ENCODING = "o200k_base"
_TIKTOKEN_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"


# -- counting tokens ------------------------------------------------------------------------


def _arguments_json(arguments: Any) -> str:
    return json.dumps(arguments, ensure_ascii=False, default=str)


def _measure(message: AnyMessage) -> tuple[str, int]:
    """The text a provider would see for ``message``, and how many images it carries."""
    content = message.content
    if isinstance(content, str):
        texts, images = [content], 0
    else:
        texts = [part.text for part in content if isinstance(part, TextContent)]
        images = sum(isinstance(part, ImageContent) for part in content)
    if isinstance(message, AssistantMessage):
        texts.append(message.reasoning or "")
        for call in message.tool_calls:
            texts += [call.name, _arguments_json(call.arguments)]
    elif isinstance(message, ToolMessage):
        texts.append(message.name)
    return "".join(texts), images


def estimate_tokens(messages: Sequence[AnyMessage]) -> int:
    """Estimate tokens offline: ~4 characters a token, framing per message, flat per image.

    It errs on neither side on purpose: good enough to decide when to compact, and the same
    on every machine.
    """
    total = 0
    for message in messages:
        text, images = _measure(message)
        total += MESSAGE_OVERHEAD_TOKENS + -(-len(text) // CHARS_PER_TOKEN)
        total += images * IMAGE_TOKENS
    return total


def _cached_encoding_file() -> str | None:
    """Where tiktoken keeps ``o200k_base`` if it has been fetched before, else None.

    tiktoken names a cached file after the SHA-1 of its URL, in ``TIKTOKEN_CACHE_DIR``,
    else ``DATA_GYM_CACHE_DIR``, else ``<tmp>/data-gym-cache``; an empty directory setting
    disables the cache (it would always download). Looking first keeps us offline.
    """
    cache_dir = os.environ.get("TIKTOKEN_CACHE_DIR", os.environ.get("DATA_GYM_CACHE_DIR"))
    if cache_dir is None:
        cache_dir = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    if not cache_dir:
        return None
    path = os.path.join(cache_dir, hashlib.sha1(_TIKTOKEN_URL.encode()).hexdigest())
    return path if os.path.isfile(path) else None


@functools.cache
def _load_encoding(path: str) -> Any | None:
    try:
        import tiktoken

        return tiktoken.get_encoding(_TIKTOKEN_ENCODING)
    except Exception:  # not installed, or an unreadable cache: estimate instead
        return None


def _default_counter() -> TokenCounter:
    path = _cached_encoding_file()
    encoding = _load_encoding(path) if path is not None else None
    if encoding is None:
        return estimate_tokens

    def count_with_tiktoken(messages: Sequence[AnyMessage]) -> int:
        total = 0
        for message in messages:
            text, images = _measure(message)
            total += MESSAGE_OVERHEAD_TOKENS + len(encoding.encode(text, disallowed_special=()))
            total += images * IMAGE_TOKENS
        return total

    return count_with_tiktoken


# -- choosing what to replace ---------------------------------------------------------------


def _turn_starts(messages: Sequence[AnyMessage]) -> list[int]:
    """Indices where a user turn starts.

    A ``UserMessage`` or ``AgentMessage`` starts a turn unless a tool result after it
    answers a call made before it (a message a hook slipped into a tool batch): cutting
    there would separate that call from its result.
    """
    called_at: dict[str, int] = {}
    reach = list(range(len(messages)))  # the last result index of calls made at i
    for index, message in enumerate(messages):
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls:
                called_at[call.id] = index
        elif isinstance(message, ToolMessage):
            origin = called_at.get(message.tool_call_id)
            if origin is not None:
                reach[origin] = max(reach[origin], index)
    starts: list[int] = []
    furthest = -1
    for index, message in enumerate(messages):
        if isinstance(message, UserMessage | AgentMessage) and furthest < index:
            starts.append(index)
        furthest = max(furthest, reach[index])
    return starts


def _is_checkpoint(message: AnyMessage) -> bool:
    return isinstance(message, CompactedMessage) or (
        isinstance(message, AgentMessage) and message.attributes.get("compaction") is True
    )


@dataclass(frozen=True, slots=True)
class _Plan:
    """What one compaction would do to a context."""

    tokens_before: int
    #: System messages from the older part; they stay, before the checkpoint.
    kept_system: tuple[AnyMessage, ...]
    replaced: tuple[AnyMessage, ...]
    recent: tuple[AnyMessage, ...]


# -- the extension --------------------------------------------------------------------------


class CompactionExtension(AgentExtension):
    """Summarise older dialogue into one checkpoint when the context grows too large.

    ``model`` writes the summaries (default: the request's model). Compaction starts
    when the context exceeds ``max_tokens`` and keeps the most recent whole user turns
    worth up to ``keep_recent_tokens``. ``count_tokens(messages) -> int`` replaces the
    default counter. ``await extension.compact(context)`` forces a pass from any hook
    that runs in READY (``Agent.compact`` does it through ``on_compact``).
    """

    def __init__(
        self,
        model: AgentModel | None = None,
        *,
        max_tokens: int = 128_000,
        keep_recent_tokens: int = 32_000,
        count_tokens: TokenCounter | None = None,
    ) -> None:
        if model is not None and not callable(getattr(model, "stream", None)):
            raise TypeError(f"model must have a stream(request) method, got {model!r}")
        for name, value in (("max_tokens", max_tokens), ("keep_recent_tokens", keep_recent_tokens)):
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"{name} must be an int, got {type(value).__name__}")
            if value <= 0:
                raise ValueError(f"{name} must be positive, got {value}")
        if count_tokens is not None and not callable(count_tokens):
            raise TypeError(f"count_tokens must be callable or None, got {count_tokens!r}")
        self.model = model
        self.max_tokens = max_tokens
        self.keep_recent_tokens = keep_recent_tokens
        self._count_tokens = count_tokens
        # (session_id, request_id) -> ids of messages whose summary was not applied.
        self._declined: dict[tuple[str, str], tuple[int, ...]] = {}

    @property
    def count_tokens(self) -> TokenCounter:
        """The token counter in use (the default one is chosen at first use)."""
        if self._count_tokens is None:
            self._count_tokens = _default_counter()
        return self._count_tokens

    def _count(self, messages: Sequence[AnyMessage]) -> int:
        tokens = self.count_tokens(messages)
        if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0:
            raise TypeError(f"count_tokens must return an int >= 0, got {tokens!r}")
        return tokens

    # -- hooks -------------------------------------------------------------------------------

    async def before_model(self, context: AgentRunContext, request: ModelRequest) -> None:
        messages = context.state.messages
        tokens = self._count(messages)
        if tokens <= self.max_tokens:
            return
        plan = self._plan(messages, tokens)
        if plan is None:
            return
        key = (context.session_id, context.request_id)
        fingerprint = tuple(id(message) for message in plan.replaced)
        if self._declined.get(key) == fingerprint:
            return
        if await self._run(context, plan) is None:
            self._declined[key] = fingerprint

    async def on_compact(self, context: AgentRunContext) -> None:
        await self.compact(context)

    async def on_event(self, context: AgentRunContext, event: ExtensionEvent) -> None:
        if isinstance(event, PhaseTransitionEvent) and event.current_phase.is_terminal:
            self._declined.pop((context.session_id, context.request_id), None)

    async def compact(self, context: AgentRunContext) -> CompactionEvent | None:
        """Compact now, whatever the size; return the applied compaction, or None."""
        messages = context.state.messages
        plan = self._plan(messages, self._count(messages))
        if plan is None:
            return None
        return await self._run(context, plan)

    # -- the pass ----------------------------------------------------------------------------

    def _plan(self, messages: Sequence[AnyMessage], tokens_before: int) -> _Plan | None:
        starts = _turn_starts(messages)
        cut = starts[-1] if starts else len(messages)
        used = self._count(_dialogue(messages[cut:]))
        for start, end in reversed(list(pairwise(starts))):
            if used >= self.keep_recent_tokens:
                break  # the budget is spent: older turns are summarised
            used += self._count(_dialogue(messages[start:end]))
            cut = start
        older = messages[:cut]
        replaced = tuple(_dialogue(older))
        if not replaced or (len(replaced) == 1 and _is_checkpoint(replaced[0])):
            return None
        return _Plan(
            tokens_before=tokens_before,
            kept_system=tuple(m for m in older if isinstance(m, SystemMessage)),
            replaced=replaced,
            recent=tuple(messages[cut:]),
        )

    async def _run(self, context: AgentRunContext, plan: _Plan) -> CompactionEvent | None:
        session_id = context.session_id
        request = ModelRequest(
            messages=(SystemMessage(SUMMARY_INSTRUCTIONS), UserMessage(_transcript(plan.replaced)))
        )
        # Emitting COMPACTION_STARTED moves the request to COMPACTING, and
        # COMPACTION_COMPLETED back to READY (see AgentRunContext.emit).
        await context.emit(AgentEvent(E.COMPACTION_STARTED, session_id))
        response = await self._summarise(context, request)

        summary = response.message.content.strip()
        checkpoint = CompactedMessage(f"{CHECKPOINT_HEADER}\n\n{summary}")
        if (
            not summary
            or response.stop is not None
            or self._count([checkpoint]) >= self._count(plan.replaced)
        ):
            await context.emit(AgentEvent(E.COMPACTION_COMPLETED, session_id, applied=False))
            return None

        messages = (*plan.kept_system, checkpoint, *plan.recent)
        context.replace_messages(messages, emit_new=False)
        replaced, kept = len(plan.replaced), len(_dialogue(plan.recent))
        compaction = CompactionEvent(
            1,
            replaced,
            replaced + 1,
            replaced + kept,
            checkpoint.content,
            checkpoint=checkpoint,
            replaced=plan.replaced,
            messages=messages,
            tokens_before=plan.tokens_before,
            tokens_after=self._count(messages),
        )
        await context.publish(compaction)
        await context.emit(
            AgentEvent(E.COMPACTION_COMPLETED, session_id, applied=True, compaction=compaction)
        )
        return compaction

    async def _summarise(self, context: AgentRunContext, request: ModelRequest) -> ModelResponse:
        """Stream the summary, mirroring its deltas; the response is the truth."""
        session_id = context.session_id
        model = self.model or context.model
        response: ModelResponse | None = None
        stream = model.stream(request)
        try:
            async for item in stream:
                kind = getattr(item, "type", None)
                if response is not None:
                    raise AgentProtocolError(
                        f"Summary model stream yielded {getattr(kind, 'value', item)!r} "
                        "after its completed event"
                    )
                if kind is ModelEventType.TEXT:
                    await context.emit(
                        AgentEvent(E.COMPACTION_TEXT_DELTA, session_id, delta=item.delta)
                    )
                elif kind is ModelEventType.REASONING:
                    await context.emit(
                        AgentEvent(E.COMPACTION_REASONING_DELTA, session_id, delta=item.delta)
                    )
                elif kind is ModelEventType.COMPLETED:
                    if not isinstance(item.response, ModelResponse):
                        raise AgentProtocolError("A completed model event needs a ModelResponse")
                    if item.response.message.tool_calls:
                        raise AgentProtocolError(
                            "The summary model answered with tool calls; a compaction "
                            "summary must be text"
                        )
                    response = item.response
                elif kind is ModelEventType.TOOL_CALL:
                    raise AgentProtocolError(
                        "The summary model streamed a tool call; a compaction summary must be text"
                    )
                # Server tool traffic is display data of the provider's: ignored.
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
        if response is None:
            raise AgentProtocolError("Summary model stream ended without a response")
        return response

    def __repr__(self) -> str:
        return (
            f"<CompactionExtension max_tokens={self.max_tokens} "
            f"keep_recent_tokens={self.keep_recent_tokens}>"
        )


def _dialogue(messages: Sequence[AnyMessage]) -> list[AnyMessage]:
    """The messages compaction may replace: everything but system messages."""
    return [message for message in messages if not isinstance(message, SystemMessage)]


def _transcript(messages: Sequence[AnyMessage]) -> str:
    """The older messages as plain text for the summary model (images become a marker)."""
    blocks: list[str] = []
    for message in messages:
        text = content_text(message.content)
        if not isinstance(message.content, str) and any(
            isinstance(part, ImageContent) for part in message.content
        ):
            text = f"{text}\n[image]".strip()
        if isinstance(message, UserMessage):
            blocks.append(f"[user]\n{text}")
        elif isinstance(message, AgentMessage):
            label = "earlier summary" if _is_checkpoint(message) else "application instruction"
            blocks.append(f"[{label}]\n{text}")
        elif isinstance(message, AssistantMessage):
            if text:
                blocks.append(f"[assistant]\n{text}")
            for call in message.tool_calls:
                blocks.append(f"[assistant called {call.name}({_arguments_json(call.arguments)})]")
        elif isinstance(message, ToolMessage):
            outcome = "result" if message.success else "error"
            blocks.append(f"[{message.name} {outcome}]\n{text}")
    body = "\n\n".join(blocks)
    return f"Summarise this conversation:\n\n<conversation>\n{body}\n</conversation>"
