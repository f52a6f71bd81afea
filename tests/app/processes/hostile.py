"""Hostile frames and the check that every one is answered: shared by the communicator run
and the real-socket (daphne) run of ``test_hostile.py``.

``frames()`` is a Hypothesis strategy for what an attacker sends: protocol frames of every
type the server reads (staff-only ones too) with hostile field values (NUL, lone
surrogates, huge and non-finite numbers, deep nesting, oversized text, names of
application-only events, ids of real waits), arbitrary JSON, broken JSON and binary
frames. Runs really happen: ``KeywordModel`` answers ``ask`` with a question and ``note``
with an approval wait, so replies meet real waits.

The types are named here, not left to chance: besides its seed, Hypothesis draws values
from the constants of the application modules loaded so far (and keeps the pool its first
draw in the process saw), so a run inside the whole suite draws other frames than a run
alone. A real type drawn only that way, such as ``request_human``, met an answer this
check did not know (``handoff_requested``) and waited 10 s in vain, in the suite only.

``Exchange`` sends one frame and waits for its answer. A frame is answered by the first
frame the server sends that is not part of a run already going (those stream on while
other frames are answered): one of ``ANSWERS``, a ``run_cancelled``, or the first frame
of a new run. ``request_human`` stops a run that is going (its ``run_cancelled`` is that
run's last frame) and is answered by ``handoff_requested``. A frame that gets no answer,
or a socket that closes, fails the run.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, get_args

from hypothesis import strategies as st

from agent_app.protocol.frames import MAX_CONTENT_BYTES, InboundFrame

#: Text with everything a database or a UTF-8 encoder may choke on.
NASTY_TEXT = [
    "\x00",
    "a\x00b",
    "\ud800",
    "\udfff tail",
    "\ud83d",
    "<script>alert(1)</script>",
    "x" * (MAX_CONTENT_BYTES + 1),
    "é" * (MAX_CONTENT_BYTES // 2 + 1),
    " \n\t",
    "",
    "ask me something",
    "note: save this",
    "\u2028\u2029",
    "\U0001f600",
]
#: Raw frame texts that are not what ``json.dumps`` would ever write.
RAW_FRAMES = [
    "[" * 1000,
    "[" * 100_000,
    "{" * 40,
    '{"a":' * 33 + "1" + "}" * 33,
    '{"type": "ping", "x": NaN}',
    '{"type": "ping", "x": Infinity}',
    '{"type": "ping", "x": -Infinity}',
    '{"type": "ping", "x": 1e999}',
    '{"type": "ping", "x": ' + "9" * 5000 + "}",
    '{"type": "ping", "x": 99999999999999999999999}',
    '{"type": "external_event", "name": "ask_user_response", '
    '"payload": {"tool_call_id": "\\ud800", "answer": "x"}}',
    '{"type": "user_message", "content": "\\u0000"}',
    "{not json",
    "",
    "   ",
    "null",
    '"ping"',
    '{"type": "ping"',
]
REPLY_NAMES = [
    "ask_user_response",
    "approval_response",
    "steering_message",
    "internal_message",
    "run_completed",
]
#: Every frame type the server reads, from the protocol itself.
FRAME_TYPES = [get_args(kind.model_fields["type"].annotation)[0] for kind in get_args(InboundFrame)]
#: The frames that answer the frame just sent (the socket's, or its session's, reply).
ANSWERS = frozenset(
    {
        "error",
        "pong",
        "external_event_result",
        "history_page",
        "branch_switched",
        "feedback_saved",
        "handoff_requested",
    }
)

texts = st.one_of(
    st.sampled_from(NASTY_TEXT),
    st.text(st.characters(exclude_categories=()), max_size=40),
)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | texts,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(texts, children, max_size=3),
    max_leaves=8,
)


def _deep(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = [value]
    return value


payloads = st.one_of(
    st.fixed_dictionaries(
        {"tool_call_id": st.sampled_from(["ask-1", "note-1", "nope"]) | texts},
        optional={
            "answer": json_values,
            "approved": st.sampled_from([True, False]) | json_values,
            "content": texts,
            "digest": texts,
        },
    ),
    st.dictionaries(texts, json_values, max_size=3),
    st.integers(min_value=28, max_value=40).map(lambda depth: {"deep": _deep(depth)}),
    json_values,
)
#: Places in a chat (``position``, ``index``): a few real ones and some that are not.
places = st.integers(min_value=-1, max_value=4) | st.sampled_from([None, "1", 2**31 + 1])
protocol_frames = st.fixed_dictionaries(
    {"type": st.sampled_from(FRAME_TYPES) | texts},
    optional={
        "content": texts | json_values,
        "name": st.sampled_from(REPLY_NAMES) | texts,
        "payload": payloads,
        "position": places,
        "index": places,
        "rating": st.sampled_from(["up", "down", "sideways"]),
        "request_id": st.sampled_from(["ask-1", "nope"]) | texts,
    },
)


#: What a real page sends, so the hostile frames meet runs, waits and replies that work.
def _valid_frames(failing: bool) -> st.SearchStrategy[dict[str, Any]]:
    said = ["ask me", "note: buy milk", "hello", "what now?", *(["fail"] if failing else [])]
    return st.one_of(
        st.builds(lambda text: {"type": "user_message", "content": text}, st.sampled_from(said)),
        st.builds(lambda text: {"type": "steer", "content": text}, st.sampled_from(said)),
        st.just({"type": "cancel"}),
        st.just({"type": "ping"}),
        st.just({"type": "regenerate"}),
        st.just({"type": "request_human"}),
        st.just(
            {
                "type": "external_event",
                "name": "ask_user_response",
                "payload": {"tool_call_id": "ask-1", "answer": "a"},
            }
        ),
        st.builds(
            lambda approved: {
                "type": "external_event",
                "name": "approval_response",
                "payload": {"tool_call_id": "note-1", "approved": approved},
            },
            st.booleans(),
        ),
    )


@st.composite
def frames(draw: st.DrawFn, ascii_only: bool = False, failing: bool = True) -> str | bytes:
    """One frame: a third of them what a page sends, the rest hostile (text, or binary).

    ``failing`` lets ``fail`` make the model raise (a run that fails, logged as such).
    """
    kind = draw(st.integers(min_value=0, max_value=14))
    if kind == 0:
        return draw(st.binary(max_size=20) | st.just(b'{"type": "ping"}'))
    if kind == 1:
        return draw(st.sampled_from(RAW_FRAMES))
    if kind < 7:
        value = draw(_valid_frames(failing))
    else:
        value = draw(json_values) if kind == 7 else draw(protocol_frames)
    # ``ensure_ascii`` escapes lone surrogates (\\udXXX); without it they travel raw, which
    # only an in-process client can send (a real socket's UTF-8 encoder refuses them).
    ascii_text = ascii_only or draw(st.booleans())
    return json.dumps(value, ensure_ascii=ascii_text, allow_nan=True)


class SocketClosed(Exception):
    """The server closed the socket (or the application ended)."""


@dataclass
class Tally:
    """What a hostile run did: printed by the tests, quoted in docs/security.md."""

    frames: int = 0
    answered: int = 0
    sockets: int = 0
    sockets_closed: int = 0
    runs_started: int = 0
    codes: dict[str, int] = field(default_factory=dict)

    def line(self, where: str) -> str:
        codes = ", ".join(f"{code} {count}" for code, count in sorted(self.codes.items()))
        return (
            f"hostile input ({where}): {self.frames} frames sent, {self.answered} answered, "
            f"{self.sockets} sockets, {self.sockets_closed} closed by the server, "
            f"{self.runs_started} runs started; answers: {codes}"
        )


class Exchange:
    """Sends frames on one socket and waits, for each, for the frame that answers it."""

    def __init__(
        self,
        send: Callable[[str | bytes], Awaitable[None]],
        receive: Callable[[], Awaitable[dict[str, Any]]],
        tally: Tally,
    ) -> None:
        self._send = send
        self._receive = receive
        self.tally = tally
        #: Runs seen so far: their frames stream on and answer nothing.
        self.runs: set[str] = set()

    async def frame(self, frame: str | bytes) -> dict[str, Any]:
        """Send ``frame``; return its answer."""
        self.tally.frames += 1
        asks_for_a_person = _type_of(frame) == "request_human"
        await self._send(frame)
        while True:
            reply = await self._receive()
            kind = reply["type"]
            request_id = reply.get("request_id")
            if kind in ANSWERS or (kind == "run_cancelled" and not asks_for_a_person):
                break
            if request_id is not None and request_id not in self.runs:
                self.runs.add(request_id)
                self.tally.runs_started += 1
                break
        self.tally.answered += 1
        label = f"error {reply['code']}" if kind == "error" else kind
        self.tally.codes[label] = self.tally.codes.get(label, 0) + 1
        return reply


def _type_of(frame: str | bytes) -> Any:
    """The ``type`` a frame names, if it is a JSON object (None for anything else)."""
    try:
        value = json.loads(frame)
    except (ValueError, RecursionError):
        return None
    return value.get("type") if isinstance(value, dict) else None
