"""The first frame of a long chat: size and time to the ``session`` frame, and paging.

    python -m bench.history            # full run, about a minute
    python -m bench.history --smoke    # a few repeats, every check, no target judged

Two chats are stored straight into the database of a real daphne server (``bench.dbtool``
writes the rows as the app does), owned by the benchmark's anonymous browser:

- **long**: 5,000 messages (user and assistant text of 200 characters, 2,500 runs);
- **wide**: 80 messages of 30 KB each (40 runs).

For each chat the benchmark opens a socket again and again (``--repeats``) and times
*connect → session frame*: from the start of the WebSocket handshake (TCP connect
included) until the ``session`` frame has arrived and been decoded, over a real daphne
socket on ``127.0.0.1``. It reports the median and p95, and the frame's size in UTF-8 bytes.
Targets (issue 10): the frame under 64 KiB, and under 50 ms on this machine.

Then it pages the whole chat back with ``history_before`` (100 messages a page) from the
oldest position the ``session`` frame holds, and checks that every stored message is
reached exactly once, in order, and that no page frame passes 512 KiB.

Databases: SQLite (a throw-away file, in ``/dev/shm`` where it exists), and PostgreSQL, a
database created for the run and dropped after it (``--databases`` picks).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from websockets.asyncio.client import connect

from bench.machine import describe_machine, package_versions
from bench.serve import (
    DEFAULT_POSTGRES,
    Server,
    browser_cookie,
    dbtool,
    load_average,
    migrate,
    postgres_database,
    scratch_dir,
    site_env,
)

TARGET_FRAME_BYTES = 64 * 1024
TARGET_FIRST_FRAME_MS = 50.0
MAX_FRAME_BYTES = 512 * 1024
PAGE_LIMIT = 100
#: The chats: (label, messages, characters per message).
CHATS = [("long: 5,000 messages", 5000, 200), ("wide: 80 messages of 30 KB", 80, 30_000)]
WAIT_S = 30.0


def load() -> str:
    return "/".join(f"{value:.1f}" for value in load_average())


async def first_frame(base: str, session_id: str, cookie: str) -> tuple[float, int, dict]:
    """Connect, read the ``session`` frame: (milliseconds, UTF-8 bytes, frame)."""
    url = f"{base}/ws/sessions/{session_id}/"
    origin = base.replace("ws://", "http://", 1)
    started = time.perf_counter()
    socket = await asyncio.wait_for(
        connect(
            url,
            origin=origin,
            compression=None,
            max_size=None,
            additional_headers={"Cookie": cookie},
        ),
        WAIT_S,
    )
    try:
        raw = await asyncio.wait_for(socket.recv(), WAIT_S)
        frame = json.loads(raw)
        elapsed = (time.perf_counter() - started) * 1000
    finally:
        await socket.close()
    if frame.get("type") != "session":
        raise RuntimeError(f"expected the session frame, got {str(frame)[:300]}")
    return elapsed, len(raw.encode("utf-8")), frame


async def page_all(base: str, session_id: str, cookie: str, stored: int) -> dict[str, Any]:
    """Page the chat back to its first message; check every message arrives exactly once."""
    url = f"{base}/ws/sessions/{session_id}/"
    origin = base.replace("ws://", "http://", 1)
    async with connect(
        url, origin=origin, compression=None, max_size=None, additional_headers={"Cookie": cookie}
    ) as socket:
        session = json.loads(await asyncio.wait_for(socket.recv(), WAIT_S))
        positions = [item["position"] for item in session["history"]]
        has_more = session["has_more_history"]
        pages, largest, times = 0, 0, []
        while has_more:
            started = time.perf_counter()
            request = {"type": "history_before", "position": positions[0], "limit": PAGE_LIMIT}
            await socket.send(json.dumps(request))
            raw = await asyncio.wait_for(socket.recv(), WAIT_S)
            times.append((time.perf_counter() - started) * 1000)
            page = json.loads(raw)
            if page.get("type") != "history_page":
                raise RuntimeError(f"expected a history_page, got {str(page)[:300]}")
            largest = max(largest, len(raw.encode("utf-8")))
            got = [item["position"] for item in page["messages"]]
            if not got:
                raise RuntimeError(f"an empty page before position {positions[0]} (has_more)")
            positions = got + positions
            has_more = page["has_more"]
            pages += 1
    complete = positions == list(range(stored))
    return {
        "pages": pages,
        "reached": len(positions),
        "distinct": len(set(positions)),
        "stored": stored,
        "complete_in_order": complete,
        "largest_page_bytes": largest,
        "page_ms_median": statistics.median(times) if times else 0.0,
    }


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


async def measure(base: str, cookie: str, sessions: list[str], repeats: int) -> list[dict]:
    rows = []
    empty = str(uuid.uuid4())  # a chat with no row: the handshake and an empty frame
    targets = [("empty chat (reference)", empty, 0), *zip_chats(sessions)]
    for label, session_id, stored in targets:
        for _ in range(3):  # warm the server's code paths and the session's rows
            await first_frame(base, session_id, cookie)
        times, sizes = [], []
        frame: dict = {}
        for _ in range(repeats):
            elapsed, size, frame = await first_frame(base, session_id, cookie)
            times.append(elapsed)
            sizes.append(size)
        row = {
            "chat": label,
            "stored_messages": stored,
            "repeats": repeats,
            "median_ms": statistics.median(times),
            "p95_ms": percentile(times, 0.95),
            "max_ms": max(times),
            "frame_bytes": max(sizes),
            "history_in_frame": len(frame.get("history", [])),
            "has_more_history": frame.get("has_more_history"),
            "load": load(),
        }
        if stored:
            row["paging"] = await page_all(base, session_id, cookie, stored)
        rows.append(row)
        print(
            f"  {label}: median {row['median_ms']:.1f} ms, p95 {row['p95_ms']:.1f} ms, "
            f"{row['frame_bytes']:,} bytes, {row['history_in_frame']} messages in the frame "
            f"(load {row['load']})",
            flush=True,
        )
    return rows


def zip_chats(sessions: list[str]) -> list[tuple[str, str, int]]:
    return [
        (label, session_id, count)
        for (label, count, _chars), session_id in zip(CHATS, sessions, strict=True)
    ]


def run_on(database_url: str, label: str, workdir: Path, repeats: int) -> dict:
    env = site_env(database_url)
    migrate(env)
    with Server(env, workdir, f"history-{label}") as server:
        cookie = browser_cookie(server.port)
        spec = [{"messages": count, "chars": chars} for _label, count, chars in CHATS]
        started = time.perf_counter()
        sessions = dbtool(env, "populate", "--cookie", cookie, "--spec", json.dumps(spec))
        print(f"{label}: chats stored in {time.perf_counter() - started:.1f} s", flush=True)
        rows = asyncio.run(measure(server.base, cookie, sessions["sessions"], repeats))
        problems = server.log_problems()
    return {"database": label, "rows": rows, "log_problems": problems}


def judge(results: list[dict]) -> list[str]:
    verdicts = []
    for result in results:
        for row in result["rows"]:
            if not row["stored_messages"]:
                continue
            size_met = row["frame_bytes"] < TARGET_FRAME_BYTES
            time_met = row["median_ms"] < TARGET_FIRST_FRAME_MS
            paging = row["paging"]
            paged = paging["complete_in_order"] and paging["largest_page_bytes"] < MAX_FRAME_BYTES
            verdicts.append(
                f"{result['database']}, {row['chat']}: {row['frame_bytes']:,} bytes "
                f"(< 64 KiB: {'met' if size_met else 'MISSED'}), median "
                f"{row['median_ms']:.1f} ms / p95 {row['p95_ms']:.1f} ms (< 50 ms: "
                f"{'met' if time_met else 'MISSED'}), paging {paging['reached']:,}/"
                f"{paging['stored']:,} in {paging['pages']} pages "
                f"({'complete' if paged else 'INCOMPLETE'})"
            )
    return verdicts


def render(results: list[dict]) -> str:
    lines = [
        "| database | chat | frame bytes | messages in frame | connect → `session` median "
        "| p95 | max | pages to the first message | largest page | load |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for result in results:
        for row in result["rows"]:
            paging = row.get("paging")
            pages = f"{paging['pages']} ({paging['reached']:,} messages)" if paging else "-"
            largest = f"{paging['largest_page_bytes']:,} B" if paging else "-"
            lines.append(
                f"| {result['database']} | {row['chat']} | {row['frame_bytes']:,} "
                f"| {row['history_in_frame']} | {row['median_ms']:.1f} ms "
                f"| {row['p95_ms']:.1f} ms | {row['max_ms']:.1f} ms | {pages} | {largest} "
                f"| {row['load']} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="a few repeats, for CI")
    parser.add_argument("--repeats", type=int, help="connections timed per chat (default 50)")
    parser.add_argument("--databases", default="sqlite,postgres", help="sqlite and/or postgres")
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES)
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)
    repeats = args.repeats or (5 if args.smoke else 50)
    databases = [name.strip() for name in args.databases.split(",") if name.strip()]
    started = time.perf_counter()
    results = []
    with tempfile.TemporaryDirectory(prefix="zett-history-", dir=scratch_dir()) as tmp:
        workdir = Path(tmp)
        for name in databases:
            if name == "sqlite":
                url = f"sqlite:///{workdir / 'history.sqlite3'}"
                results.append(run_on(url, "SQLite", workdir, repeats))
            elif name == "postgres":
                with postgres_database(args.postgres) as url:
                    results.append(run_on(url, "PostgreSQL", workdir, repeats))
            else:
                parser.error(f"unknown database {name!r}")
    machine = describe_machine()
    print()
    print(f"Machine: {machine['cpu']}, {machine['cores']} cores, Python {machine['python']}")
    versions = package_versions(["daphne", "channels", "Django", "psycopg", "websockets"])
    print("Versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    print()
    print(render(results))
    verdicts = judge(results)
    print()
    print("\n".join(verdicts))
    failures = [v for v in verdicts if "INCOMPLETE" in v]
    for result in results:
        if result["log_problems"]:
            failures.append(f"{result['database']}: server log: {result['log_problems'][:5]}")
    print(f"\nTotal time: {time.perf_counter() - started:.0f} s")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        report = {"machine": machine, "versions": versions, "results": results}
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    if failures:
        print("\n".join(["FAILED:", *failures]))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
