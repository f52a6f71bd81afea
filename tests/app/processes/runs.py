"""What the process tests watch of a run: its frames on a socket, and the rows a worker
left in its database (read straight from the database, so they hold after a SIGKILL).

The frame checks go to ``Client.until``; the row readers take the worker's database URL
(``one_worker``, ``two_workers``).
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.app.servers import Client, DaphneProcess

Match = Callable[[dict[str, Any]], bool]


def event_is(kind: str) -> Match:
    """An ``agent_event`` frame of event type ``kind``."""
    return lambda frame: (frame.get("event") or {}).get("type") == kind


def is_custom(name: str) -> Match:
    """A CUSTOM event named ``name`` (``ask_user``, ``approval_requested`` …)."""
    return lambda f: (f.get("event") or {}).get("type") == "custom" and f["event"]["name"] == name


def completed_or_failed(frame: dict[str, Any]) -> bool:
    """The run's answer is complete, or it failed (or the frame was refused)."""
    return event_is("run_completed")(frame) or frame["type"] in ("run_failed", "error")


def ended(frame: dict[str, Any]) -> bool:
    """The run ended, however: completed, failed, interrupted or cancelled."""
    return completed_or_failed(frame) or frame["type"] in ("run_interrupted", "run_cancelled")


def started_request(frames: list[dict[str, Any]]) -> str:
    """The ``request_id`` of the run whose ``run_started`` is among ``frames``."""
    return next(frame for frame in frames if frame["type"] == "run_started")["request_id"]


async def sqlite_run_status(database_url: str, request_id: str, wanted: str) -> str:
    """Wait (up to a minute) until the run row says ``wanted``, read straight from the
    SQLite file (no socket needs to be open); the last status read."""
    path = database_url.removeprefix("sqlite:///")
    deadline = time.monotonic() + 60
    status = ""
    while time.monotonic() < deadline:
        with sqlite3.connect(path) as db:
            row = db.execute(
                "SELECT status FROM agent_app_chatrun WHERE request_id = ?", (request_id,)
            ).fetchone()
        status = row[0] if row else ""
        if status == wanted:
            return status
        await asyncio.sleep(0.1)
    return status


def saved_notes(database_url: str) -> int:
    """How many notes the ``save_note`` tool stored (SQLite or PostgreSQL)."""
    if database_url.startswith("sqlite"):
        with sqlite3.connect(database_url.removeprefix("sqlite:///")) as connection:
            return connection.execute("SELECT COUNT(*) FROM agent_app_note").fetchone()[0]
    import psycopg

    with psycopg.connect(database_url) as connection:
        return connection.execute("SELECT COUNT(*) FROM agent_app_note").fetchone()[0]


async def kill_and_see_it_continued(
    owner: DaphneProcess, survivor: Client, before: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """SIGKILL ``owner``, the worker running the run that ``before`` (the frames
    ``survivor`` saw on the other worker) started; the frames up to the run's end.

    The survivor continues the same run (attempt 2) to completion, never interrupted,
    and its socket sees every ``seq`` once, in order, across the kill."""
    request_id = started_request(before)
    owner.kill()
    after = await survivor.until(ended)
    assert "run_interrupted" not in [frame["type"] for frame in after]
    continued = next(frame for frame in after if frame["type"] == "run_continued")
    assert (continued["request_id"], continued["attempt"]) == (request_id, 2)
    assert event_is("run_completed")(after[-1]) and after[-1]["request_id"] == request_id
    seqs = [frame["seq"] for frame in before + after if "seq" in frame]
    assert seqs == sorted(set(seqs))  # strictly increasing on the watching socket
    return after
