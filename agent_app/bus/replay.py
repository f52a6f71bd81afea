"""The frames of a session's active run, kept so a socket that (re)connects can catch up.

A run's frames — from its ``run_started`` to its last event — are appended here as they are
broadcast, already encoded. A socket that connects while the run is active gets those after
the ``seq`` it last saw (``frames_after``), then the live ones: nothing lost, nothing twice.

The buffer is bounded by ``limit`` frames. When it grows past the bound, runs of adjacent
text (or reasoning) delta frames of the same segment are merged into one frame each, which
carries the ``seq`` of its last delta and remembers where each original delta ended: a
replay stays complete and in order, and a client that resumes from inside a merged run
still receives exactly the part it had not seen. Only deltas are merged; a run's other
frames are few (a handful per model call and tool), so they are kept as they are. A merged
frame stays within the frame budget (``agent_app.protocol.text``): a run of deltas too long for
one frame is merged into several, each as large as fits.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from agent_app.protocol.text import FRAME_BUDGET, encode_frame, text_bytes

__all__ = ["DEFAULT_REPLAY_FRAMES", "MERGEABLE_EVENTS", "ReplayBuffer", "text_from_fields"]

#: Frames a run keeps before deltas are merged.
DEFAULT_REPLAY_FRAMES = 10_000
#: ``agent_event`` types whose frames may be merged (their ``delta`` concatenates).
MERGEABLE_EVENTS = frozenset({"text_delta", "reasoning_delta"})
#: Bytes a merged frame's ``seq`` may grow by (to the 19 digits of the largest).
_SEQ_GROWTH = 20


@dataclass(slots=True)
class _Merged:
    """Several consecutive delta frames as one: ``seqs[i]``'s delta ends at ``ends[i]``."""

    frame: dict[str, Any]
    seqs: list[int] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)
    #: Bytes of the merged delta in the frame's JSON, and the most it may take there.
    size: int = 0
    room: int = 0

    @property
    def seq(self) -> int:
        return self.seqs[-1]

    def text_after(self, after_seq: int) -> str:
        """The frame, holding only the deltas numbered above ``after_seq``."""
        index = bisect_right(self.seqs, after_seq)
        if index == 0:
            return encode_frame(self.frame)
        delta = self.frame["event"]["delta"]
        event = {**self.frame["event"], "delta": delta[self.ends[index - 1] :]}
        return encode_frame({**self.frame, "event": event})


class ReplayBuffer:
    """The encoded frames of one active run, in ``seq`` order."""

    def __init__(self, limit: int = DEFAULT_REPLAY_FRAMES) -> None:
        if limit < 2:
            raise ValueError(f"A replay buffer needs room for at least 2 frames, got {limit}")
        self.limit = limit
        #: ``(seq, text, mergeable)`` for plain frames, ``_Merged`` for merged deltas.
        self._entries: list[tuple[int, str, bool] | _Merged] = []
        #: Merge when the buffer reaches this many entries (raised after a merge that
        #: could not shrink it enough, so merging stays amortised O(1) per frame).
        self._merge_at = limit

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def first_seq(self) -> int | None:
        if not self._entries:
            return None
        entry = self._entries[0]
        return entry.seqs[0] if isinstance(entry, _Merged) else entry[0]

    def clear(self) -> None:
        self._entries.clear()
        self._merge_at = self.limit

    def append(self, seq: int, text: str, *, mergeable: bool = False) -> bool:
        """Keep a broadcast frame (``mergeable`` for text/reasoning deltas).

        Returns True when this append made the buffer merge its deltas (its entries
        changed: a copy of it elsewhere must be rewritten from ``export``).
        """
        self._entries.append((seq, text, mergeable))
        if len(self._entries) > self._merge_at:
            self._merge()
            self._merge_at = max(self.limit, 2 * len(self._entries))
            return True
        return False

    def export(self) -> list[tuple[int, dict[str, str]]]:
        """The entries as ``(seq, fields)`` for a shared copy (``text_from_fields`` reads)."""
        exported: list[tuple[int, dict[str, str]]] = []
        for entry in self._entries:
            if isinstance(entry, _Merged):
                merged = {"frame": entry.frame, "seqs": entry.seqs, "ends": entry.ends}
                exported.append((entry.seq, {"m": encode_frame(merged)}))
            else:
                exported.append((entry[0], {"t": entry[1]}))
        return exported

    def frames_after(self, after_seq: int | None) -> Iterator[str]:
        """The kept frames numbered above ``after_seq`` (all of them for None)."""
        floor = -1 if after_seq is None else after_seq
        for entry in self._entries:
            if isinstance(entry, _Merged):
                if entry.seq > floor:
                    yield entry.text_after(floor)
            elif entry[0] > floor:
                yield entry[1]

    def _merge(self) -> None:
        merged: list[tuple[int, str, bool] | _Merged] = []
        joining = _Joining()
        for entry in self._entries:
            group = merged[-1] if merged else None
            if isinstance(entry, tuple) and not entry[2]:
                merged.append(entry)
                continue
            frame = _decode(entry)
            size = entry.size if isinstance(entry, _Merged) else text_bytes(frame["event"]["delta"])
            if isinstance(group, _Merged) and _same_segment(group.frame, frame):
                if group.size + size <= group.room:
                    joining.extend(group, entry, frame, size)
                    continue
            elif (
                isinstance(group, tuple)
                and group[2]
                and _same_segment(first := _decode(group), frame)
            ):
                start = _start(group, first)
                if start.size + size <= start.room:
                    joining.extend(start, entry, frame, size)
                    merged[-1] = start
                    continue
            merged.append(entry)  # not a delta of the same segment, or it would not fit
        joining.finish()
        self._entries = merged


class _Joining:
    """The deltas of the group a merge is extending, joined once when it moves on.

    Appending each delta to the group's text as it comes would copy the text every time:
    a long run's merges would cost the square of its length.
    """

    __slots__ = ("group", "length", "parts")

    def __init__(self) -> None:
        self.group: _Merged | None = None
        self.parts: list[str] = []
        self.length = 0

    def extend(
        self,
        group: _Merged,
        entry: tuple[int, str, bool] | _Merged,
        frame: dict[str, Any],
        size: int,
    ) -> None:
        if group is not self.group:
            self.finish()
            delta = group.frame["event"]["delta"]
            self.group, self.parts, self.length = group, [delta], len(delta)
        delta = frame["event"]["delta"]
        base = self.length
        if isinstance(entry, _Merged):
            group.seqs.extend(entry.seqs)
            group.ends.extend(base + end for end in entry.ends)
        else:
            group.seqs.append(entry[0])
            group.ends.append(base + len(delta))
        self.parts.append(delta)
        self.length = base + len(delta)
        group.size += size
        group.frame["seq"] = group.seqs[-1]

    def finish(self) -> None:
        if self.group is not None:
            self.group.frame["event"]["delta"] = "".join(self.parts)
            self.group, self.parts, self.length = None, [], 0


def text_from_fields(fields: dict[str, str], after_seq: int | None) -> str:
    """The frame an exported entry holds, without the deltas numbered up to ``after_seq``."""
    if "t" in fields:
        return fields["t"]
    data = json.loads(fields["m"])
    merged = _Merged(data["frame"], list(data["seqs"]), list(data["ends"]))
    return merged.text_after(-1 if after_seq is None else after_seq)


def _start(entry: tuple[int, str, bool], frame: dict[str, Any]) -> _Merged:
    """A merged group of one delta frame so far (``frame`` is its decoded text)."""
    delta = frame["event"]["delta"]
    start = _Merged({**frame, "event": dict(frame["event"])}, [entry[0]], [len(delta)])
    start.size = text_bytes(delta)
    overhead = len(entry[1].encode("utf-8")) - start.size
    start.room = FRAME_BUDGET - overhead - _SEQ_GROWTH
    return start


def _decode(entry: tuple[int, str, bool] | _Merged) -> dict[str, Any]:
    if isinstance(entry, _Merged):
        return entry.frame
    return json.loads(entry[1])


def _same_segment(a: dict[str, Any], b: dict[str, Any]) -> bool:
    ea, eb = a["event"], b["event"]
    return (
        a.get("request_id") == b.get("request_id")
        and ea.get("type") == eb.get("type")
        and ea.get("type") in MERGEABLE_EVENTS
        and ea.get("phase") == eb.get("phase")
        and ea.get("parent_tool_call_id") == eb.get("parent_tool_call_id")  # a sub-run's
    )
