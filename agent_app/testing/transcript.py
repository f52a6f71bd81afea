"""``Transcript``: what a chat's frames say, read one frame at a time by ``ChatClient``.

It keeps every frame, every ``AgentEvent`` (as JSON), the open waits (``pending``, as the
``session`` frame lists them) and how the current run stands, and answers the one question
the client waits on: has the run *settled* — ended, or stopped until someone replies?

The runtime runs the tool calls of a model turn one after the other, in order. So a run
waits for replies when the first call of its last turn that has not ended is held by an
open wait: its own question, approval or host-page call, or (for a call that runs another
assistant, whose events carry ``parent_tool_call_id``) a sub-run that itself waits. An
approved tool that is still running, or the next call of the turn, keeps it unsettled.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["END_FRAMES", "WAIT_KINDS", "Transcript"]

#: The ``custom`` events that open a wait, and the wait's ``kind``.
WAIT_KINDS = {
    "approval_requested": "approval",
    "ask_user": "ask_user",
    "browser_tool": "browser_tool",
}
#: Frames that end a run, and the status each leaves (``run_completed`` is an event).
END_FRAMES = {
    "run_failed": "failed",
    "run_cancelled": "cancelled",
    "run_interrupted": "interrupted",
    "run_paused": "paused",
}
_TOOL_ENDS = frozenset({"tool_completed", "tool_failed", "tool_skipped"})


def _wait_of(event: dict[str, Any], request_id: str | None) -> dict[str, Any]:
    payload = event.get("payload") or {}
    kind = WAIT_KINDS[event["name"]]
    wait = {
        "request_id": request_id,
        "tool_call_id": payload.get("tool_call_id"),
        "kind": kind,
        "tool": payload.get("tool") if kind != "ask_user" else payload.get("tool", "ask_user"),
        "name": event["name"],
        "payload": payload,
        "response_event": payload.get("response_event"),
        "expires_at": payload.get("expires_at"),
    }
    if "parent_tool_call_id" in event:  # a delegate's wait, as the ``session`` frame lists it
        wait.update(agent=event.get("agent"), parent_tool_call_id=event["parent_tool_call_id"])
    return wait


def _with_tool(item: dict[str, Any]) -> dict[str, Any]:
    """A ``pending`` item of a frame, with the ``tool`` it is about at the top."""
    payload = item.get("payload") or {}
    return {
        "tool": payload.get("tool", "ask_user" if item.get("kind") == "ask_user" else None)
    } | item


class Transcript:
    """The frames of one socket, and what they say about the chat's current run."""

    def __init__(self) -> None:
        self.frames: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []
        #: The open waits, by tool call id, in the order they opened.
        self.waits: dict[str, dict[str, Any]] = {}
        #: ``None`` (no run yet), ``sent`` (a message or reply went out, no run seen yet),
        #: ``running``, ``completed``, ``failed``, ``cancelled``, ``interrupted``, ``paused``,
        #: ``stored`` (staff have taken the chat over: the message is kept for them, no run).
        self.status: str | None = None
        self.request_id: str | None = None
        #: ``{"type", "message"}`` of the last failed or interrupted run.
        self.error: dict[str, Any] | None = None
        #: Tool calls of each agent's last model turn that have not ended, by the call
        #: that started the agent (None: the chat's own agent).
        self.calls: dict[str | None, list[str]] = {}
        self.final: dict[str, Any] | None = None

    # --- reading ---------------------------------------------------------------------

    def feed(self, frame: dict[str, Any]) -> None:
        self.frames.append(frame)
        kind = frame.get("type")
        if kind == "session":
            self.waits = {
                item["tool_call_id"]: _with_tool(item) for item in frame.get("pending", [])
            }
            if self.waits:
                self.status = "paused"
        elif kind == "run_started":
            self.status, self.request_id, self.calls = "running", frame.get("request_id"), {}
        elif kind == "agent_event":
            self._event(frame["event"], frame.get("request_id"))
        elif kind == "customer_message" and self.status == "sent":
            self.status = "stored"  # taken over: stored for staff, and no run starts
        elif kind == "reply_accepted":
            self.waits.pop(frame.get("correlation_id"), None)
        elif kind in END_FRAMES:
            self._end(END_FRAMES[kind], frame)

    def _event(self, event: dict[str, Any], request_id: str | None) -> None:
        self.events.append(event)
        kind = event.get("type")
        scope = event.get("parent_tool_call_id")
        if kind in ("model_completed", "model_stopped"):
            message = (event.get("response") or {}).get("message") or event.get("message") or {}
            self.calls[scope] = [call["id"] for call in message.get("tool_calls") or ()]
        elif kind in _TOOL_ENDS:
            ended = {call["id"] for call in event.get("tool_calls") or ()}
            ended.add((event.get("message") or {}).get("tool_call_id"))
            for scope_id, calls in self.calls.items():
                self.calls[scope_id] = [call_id for call_id in calls if call_id not in ended]
            for wait_id, wait in list(self.waits.items()):
                if wait_id in ended or (wait.get("payload") or {}).get("call_id") in ended:
                    del self.waits[wait_id]
        elif kind == "custom" and event.get("name") in WAIT_KINDS:
            wait = _wait_of(event, request_id)
            self.waits[wait["tool_call_id"]] = wait
        elif kind == "run_completed" and scope is None:
            self.final = event
            self._end("completed", None)

    def _end(self, status: str, frame: dict[str, Any] | None) -> None:
        self.status, self.calls = status, {}
        if status == "paused" and frame is not None:
            self.waits = {
                item["tool_call_id"]: _with_tool(item) for item in frame.get("pending", [])
            }
        else:
            self.waits = {}
        if frame is not None and status in ("failed", "interrupted"):
            self.error = frame.get("error") or {"type": status, "message": frame.get("message")}

    # --- what the client waits for -----------------------------------------------------

    def _held(self, call_id: str) -> bool:
        for wait in self.waits.values():
            if call_id in (wait["tool_call_id"], (wait.get("payload") or {}).get("call_id")):
                return True
        inner = self.calls.get(call_id)
        return bool(inner) and self._held(inner[0])

    @property
    def waiting(self) -> bool:
        """The running run waits for replies: the call it is at is held."""
        calls = self.calls.get(None)
        return (
            self.status == "running" and bool(self.waits) and bool(calls) and self._held(calls[0])
        )

    @property
    def settled(self) -> bool:
        """The run has ended, or it waits for replies."""
        return self.status not in (None, "sent", "running") or self.waiting

    @property
    def answer_text(self) -> str:
        """The text of the last answer ("" before any): its ``run_completed`` message, or
        its streamed deltas when the frame left the text out for its size."""
        if self.final is None:
            return ""
        message = self.final.get("message") or {}
        content = message.get("content")
        if self.final.get("content_omitted") or not isinstance(content, str):
            return self._streamed_answer()
        return content

    def _streamed_answer(self) -> str:
        index = self.events.index(self.final)
        start = max(
            (i for i, e in enumerate(self.events[:index]) if e["type"] == "model_started"),
            default=0,
        )
        return "".join(
            e.get("delta", "")
            for e in self.events[start:index]
            if e["type"] == "text_delta" and e.get("parent_tool_call_id") is None
        )

    def describe(self, last: int = 6) -> str:
        """The last frames, shortened, for an error message."""
        if not self.frames:
            return "no frame at all"
        shown = []
        for frame in self.frames[-last:]:
            text = json.dumps(frame, ensure_ascii=False)
            shown.append(text if len(text) <= 300 else text[:300] + "…")
        return "\n  ".join(shown)
