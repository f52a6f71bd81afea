"""Opening a chat that branched costs what opening a straight one costs.

    python -m bench.branches            # full run, about a minute
    python -m bench.branches --smoke    # a few repeats, every check, no target judged

Three chats are stored straight into the database of a real daphne server (``bench.dbtool``
writes the rows as the app does), each with the same shown path of 200 messages (100
turns of a question and an answer of 200 characters): one **straight**, one with **100**
other versions of its turns and one with **1,000** (each a question and its answer, off
the shown path, spread evenly: every turn has versions, "1/2" in one chat, "1/11" in the
other).

The benchmark opens a socket on each chat in turn, round after round (``--repeats``), so
drift in the machine's load touches all three alike, and times *connect → session frame*
over a real daphne socket on ``127.0.0.1``, as ``bench.history`` does. It reports the
median and p95 and the frame's size, then pages each chat back to its first message with
``history_before`` and checks that exactly the 200 shown messages arrive, in order.
Sockets on a shared machine are noisy, so it also times what opening costs the server
alone: building the ``session`` frame's fields in one process, the chats in turn
(``bench.dbtool snapshots``, 500 rounds; 50 with ``--smoke``).
Targets: the branched chats' frame build within 1.1x of the straight one's (judged on
the server's own cost: on a shared, loaded machine the socket's times are mostly the
scheduler's, so they are reported, not judged), and the frame of the chat with 1,000
other versions as large as the one with 100 (only the digits in ``versions`` differ).

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
from pathlib import Path
from typing import Any

from bench.history import first_frame, percentile
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

SHOWN = 200
CHARS = 200
#: The chats: (label, other versions).
CHATS = [("straight", 0), ("100 other versions", 100), ("1,000 other versions", 1000)]
TARGET_RATIO = 1.1
#: A frame may differ by the digits of ``versions`` counts, no more.
FRAME_SLACK_BYTES = 64
PAGE_LIMIT = 100


async def page_back(base: str, session_id: str, cookie: str, frame: dict) -> list[int]:
    """The positions of every shown message, paged back from the ``session`` frame."""
    from websockets.asyncio.client import connect

    positions = [item["position"] for item in frame["history"]]
    has_more = frame["has_more_history"]
    url = f"{base}/ws/sessions/{session_id}/"
    origin = base.replace("ws://", "http://", 1)
    async with connect(
        url, origin=origin, compression=None, max_size=None, additional_headers={"Cookie": cookie}
    ) as socket:
        await socket.recv()
        while has_more:
            request = {"type": "history_before", "position": positions[0], "limit": PAGE_LIMIT}
            await socket.send(json.dumps(request))
            page = json.loads(await socket.recv())
            positions = [item["position"] for item in page["messages"]] + positions
            has_more = page["has_more"]
    return positions


async def measure(base: str, cookie: str, sessions: list[str], repeats: int) -> list[dict]:
    for session_id in sessions:  # warm the server's code paths and each chat's rows
        for _ in range(3):
            await first_frame(base, session_id, cookie)
    times: dict[str, list[float]] = {session_id: [] for session_id in sessions}
    sizes: dict[str, int] = {}
    frames: dict[str, dict] = {}
    for _ in range(repeats):
        for session_id in sessions:
            elapsed, size, frame = await first_frame(base, session_id, cookie)
            times[session_id].append(elapsed)
            sizes[session_id] = max(size, sizes.get(session_id, 0))
            frames[session_id] = frame
    rows = []
    for (label, versions), session_id in zip(CHATS, sessions, strict=True):
        frame = frames[session_id]
        positions = await page_back(base, session_id, cookie, frame)
        rows.append(
            {
                "chat": label,
                "other_versions": versions,
                "median_ms": statistics.median(times[session_id]),
                "p95_ms": percentile(times[session_id], 0.95),
                "frame_bytes": sizes[session_id],
                "history_in_frame": len(frame["history"]),
                "contents": [item["content"][:40] for item in frame["history"]],
                "shown_path_complete": positions == list(range(SHOWN)),
                "load": "/".join(f"{value:.1f}" for value in load_average()),
            }
        )
        print(
            f"  {label}: median {rows[-1]['median_ms']:.2f} ms, p95 {rows[-1]['p95_ms']:.2f} ms, "
            f"{rows[-1]['frame_bytes']:,} bytes",
            flush=True,
        )
    return rows


def run_on(database_url: str, label: str, workdir: Path, repeats: int) -> dict[str, Any]:
    env = site_env(database_url)
    migrate(env)
    with Server(env, workdir, f"branches-{label}") as server:
        cookie = browser_cookie(server.port)
        spec = [{"messages": SHOWN, "chars": CHARS, "versions": count} for _, count in CHATS]
        sessions = dbtool(env, "populate", "--cookie", cookie, "--spec", json.dumps(spec))
        rows = asyncio.run(measure(server.base, cookie, sessions["sessions"], repeats))
        problems = server.log_problems()
    built = dbtool(env, "snapshots", "--repeats", str(repeats * 10), *sessions["sessions"])
    for row, session_id in zip(rows, sessions["sessions"], strict=True):
        row["frame_build_ms"] = built[session_id]["median_ms"]
        row["frame_build_p95_ms"] = built[session_id]["p95_ms"]
    return {"database": label, "rows": rows, "log_problems": problems}


def judge(results: list[dict], *, smoke: bool) -> tuple[list[str], list[str]]:
    """Verdicts for the report, and the failures among them."""
    verdicts, failures = [], []
    for result in results:
        straight, *branched = result["rows"]
        for row in result["rows"]:
            if not row["shown_path_complete"]:
                failures.append(f"{result['database']}, {row['chat']}: paging INCOMPLETE")
            if row["contents"] != straight["contents"]:
                failures.append(f"{result['database']}, {row['chat']}: another shown path")
        for row in branched:
            ratio = row["median_ms"] / straight["median_ms"]
            built = row["frame_build_ms"] / straight["frame_build_ms"]
            met = built <= TARGET_RATIO
            verdicts.append(
                f"{result['database']}, {row['chat']}: {built:.2f}x the straight chat's "
                f"frame build (≤ {TARGET_RATIO}x: {'met' if met else 'MISSED'}), "
                f"{ratio:.2f}x its connect → session median, frame "
                f"{row['frame_bytes']:,} B against {straight['frame_bytes']:,} B"
            )
            if not met and not smoke:
                failures.append(verdicts[-1])
        grown = branched[-1]["frame_bytes"] - branched[0]["frame_bytes"]
        if grown > FRAME_SLACK_BYTES:
            failures.append(f"{result['database']}: the frame grew {grown} B with the versions")
    return verdicts, failures


def render(results: list[dict]) -> str:
    lines = [
        "| database | chat | connect → `session` median | p95 | frame build median | p95 "
        "| frame bytes | messages in frame | shown path paged whole | load |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for result in results:
        for row in result["rows"]:
            lines.append(
                f"| {result['database']} | {row['chat']} | {row['median_ms']:.2f} ms "
                f"| {row['p95_ms']:.2f} ms | {row['frame_build_ms']:.2f} ms "
                f"| {row['frame_build_p95_ms']:.2f} ms "
                f"| {row['frame_bytes']:,} | {row['history_in_frame']} "
                f"| {'yes' if row['shown_path_complete'] else 'NO'} | {row['load']} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="a few repeats, for CI")
    parser.add_argument("--repeats", type=int, help="connections timed per chat (default 60)")
    parser.add_argument("--databases", default="sqlite,postgres", help="sqlite and/or postgres")
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES)
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)
    repeats = args.repeats or (5 if args.smoke else 60)
    started = time.perf_counter()
    results = []
    with tempfile.TemporaryDirectory(prefix="zett-branches-", dir=scratch_dir()) as tmp:
        workdir = Path(tmp)
        for name in (part.strip() for part in args.databases.split(",") if part.strip()):
            if name == "sqlite":
                url = f"sqlite:///{workdir / 'branches.sqlite3'}"
                results.append(run_on(url, "SQLite", workdir, repeats))
            elif name == "postgres":
                with postgres_database(args.postgres) as url:
                    results.append(run_on(url, "PostgreSQL", workdir, repeats))
            else:
                parser.error(f"unknown database {name!r}")
    machine = describe_machine()
    print(f"\nMachine: {machine['cpu']}, {machine['cores']} cores, Python {machine['python']}")
    versions = package_versions(["daphne", "channels", "Django", "psycopg", "websockets"])
    print("Versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()) + "\n")
    print(render(results) + "\n")
    verdicts, failures = judge(results, smoke=args.smoke)
    print("\n".join(verdicts))
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
