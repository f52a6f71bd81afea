"""What the benchmarks read and write in a server's database, run in a process of its own.

    DATABASE_URL=... python -m bench.dbtool populate --cookie sessionid=... --spec SPEC
    DATABASE_URL=... python -m bench.dbtool runs SESSION_ID [SESSION_ID ...]

A benchmark's own process never sets Django up (it is the client, or it drives several
servers); this does, once, on the database ``DATABASE_URL`` names, and prints one JSON
object on stdout.

- ``populate``: stores chats that belong to the anonymous browser of ``--cookie`` (the
  ``sessionid`` a page visit gave it). ``--spec`` is JSON: a list of ``{"messages": N,
  "chars": C}``, one per chat: ``N`` messages alternating user and assistant text of ``C``
  characters, two per completed run, written as the app writes rows
  (``agent_app.durable.store.row_fields``). With ``"versions": V`` the chat also holds V
  other versions of its turns (each a question and its answer, off the shown path; spread
  evenly over its turns), so its shown path is the same as a straight chat's. Prints
  ``{"sessions": [id, ...]}``.
- ``snapshots``: times building each session's ``session`` frame fields in this process
  (``agent_app.durable.history.snapshot``: its queries and items, no socket), the sessions
  in turn, ``--repeats`` rounds; prints each one's median and p95 in milliseconds.
- ``runs``: for each session, its runs (``request_id``, ``status``) and its messages
  (``position``, ``role``, ``request_id``, content length), oldest first.
- ``crash``: for each session, its runs (``request_id``, ``status``, ``attempts``), its
  user messages' count, its answers' lengths by run, and its notes' titles
  (``bench.crash_stress``); also how many runs are still ``running`` anywhere.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import uuid


def _setup() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "zett_site.settings")
    import django

    django.setup()


def populate(cookie: str, spec: list[dict[str, int]]) -> dict:
    from django.contrib.sessions.backends.db import SessionStore
    from django.db import transaction
    from django.utils import timezone

    from agent_app.durable.store import row_fields
    from agent_app.guard.access import BROWSER_KEY_FIELD
    from agent_app.models import ChatMessage, ChatRun, ChatSession, RunStatus
    from zett_agent.messages import AssistantMessage, UserMessage

    session_key = cookie.split("=", 1)[1]
    browser_key = SessionStore(session_key=session_key).get(BROWSER_KEY_FIELD)
    if not browser_key:
        raise SystemExit("the cookie names no anonymous browser (visit / first)")
    created = []
    for chat in spec:
        count, chars = int(chat["messages"]), int(chat["chars"])
        now = timezone.now()
        with transaction.atomic():
            session = ChatSession.objects.create(
                browser_key=browser_key, title=f"bench: {count} messages of {chars} characters"
            )
            rows, runs = [], []
            for position in range(count):
                if position % 2 == 0:
                    request_id = str(uuid.uuid4())
                    runs.append(
                        ChatRun(
                            request_id=request_id,
                            session=session,
                            status=RunStatus.COMPLETED,
                            worker="bench",
                            ended_at=now,
                        )
                    )
                    message = UserMessage(_text("question", position, chars))
                else:
                    message = AssistantMessage(_text("answer", position, chars))
                rows.append(
                    ChatMessage(
                        session=session,
                        position=position,
                        request_id=request_id,
                        **row_fields(message),
                    )
                )
            ChatRun.objects.bulk_create(runs, batch_size=500)
            ChatMessage.objects.bulk_create(rows, batch_size=500)  # sets their ids
            for earlier, row in itertools.pairwise(rows):
                row.follows = earlier.pk
            ChatMessage.objects.bulk_update(rows, ["follows"], batch_size=500)
            _other_versions(session, rows, int(chat.get("versions", 0)), chars)
            ChatSession.objects.filter(pk=session.pk).update(history_version=1)
        created.append(str(session.pk))
    return {"sessions": created}


def _other_versions(session, shown: list, count: int, chars: int) -> None:
    """``count`` other versions of the turns of ``shown`` (off the shown path), spread
    evenly over them."""
    from agent_app.durable.store import row_fields
    from agent_app.models import ChatMessage
    from zett_agent.messages import AssistantMessage, UserMessage

    turns = [row for row in shown if row.role == "user"]
    if not count or not turns:
        return
    on_turn = {turn.pk: 0 for turn in turns}
    for number in range(count):
        on_turn[turns[number % len(turns)].pk] += 1
    for turn in turns:
        others = on_turn[turn.pk]
        if not others:
            continue
        for number in range(1, others + 1):
            question = ChatMessage(
                session=session,
                position=turn.position,
                follows=turn.follows,
                superseded=True,
                chosen=False,
                version=number + 1,  # made after the shown one: numbered after it
                versions=others + 1,
                **row_fields(UserMessage(_text("other question", number, chars))),
            )
            question.save()
            ChatMessage(
                session=session,
                position=turn.position + 1,
                follows=question.pk,
                superseded=True,
                **row_fields(AssistantMessage(_text("other answer", number, chars))),
            ).save()
        ChatMessage.objects.filter(pk=turn.pk).update(versions=others + 1)


def _text(kind: str, position: int, chars: int) -> str:
    head = f"{kind} {position}: "
    body = "lorem ipsum dolor sit amet, consectetur adipiscing elit. "
    return (head + body * (chars // len(body) + 1))[:chars]


def runs(session_ids: list[str]) -> dict:
    from agent_app.models import ChatMessage, ChatRun

    found = {}
    for session_id in session_ids:
        run_rows = ChatRun.objects.filter(session_id=session_id).order_by("started_at")
        messages = ChatMessage.objects.filter(session_id=session_id).order_by("position")
        found[session_id] = {
            "runs": [[run.request_id, run.status] for run in run_rows],
            "messages": [
                [
                    row.position,
                    row.role,
                    row.request_id,
                    len(row.content) if isinstance(row.content, str) else -1,
                ]
                for row in messages
            ],
        }
    return found


def crash(session_ids: list[str]) -> dict:
    from agent_app.models import ChatMessage, ChatRun
    from zett_site.models import Note

    found: dict = {
        "running": ChatRun.objects.filter(status="running").count(),
        "paused": ChatRun.objects.filter(status="paused").count(),
    }
    for session_id in session_ids:
        rows = ChatMessage.objects.filter(session_id=session_id, superseded=False)
        found[session_id] = {
            "runs": [
                [run.request_id, run.status, run.attempts]
                for run in ChatRun.objects.filter(session_id=session_id).order_by("started_at")
            ],
            "user_messages": rows.filter(role="user").count(),
            "answers": [
                [row.request_id, len(row.content) if isinstance(row.content, str) else -1]
                for row in rows.filter(role="assistant", tool_calls=[]).order_by("position")
            ],
            "tool_results": [
                [row.request_id, row.success]
                for row in rows.filter(role="tool").order_by("position")
            ],
            "notes": list(
                Note.objects.filter(session_id=session_id).values_list("title", flat=True)
            ),
        }
    return found


def snapshots(session_ids: list[str], repeats: int) -> dict:
    import statistics
    import time

    from agent_app.durable.history import snapshot

    times: dict[str, list[float]] = {session_id: [] for session_id in session_ids}
    for round_ in range(repeats + 3):
        for session_id in session_ids:
            started = time.perf_counter()
            snapshot(session_id, active_request_id=None)
            if round_ >= 3:  # the first rounds warm the caches
                times[session_id].append((time.perf_counter() - started) * 1000)
    return {
        session_id: {
            "median_ms": statistics.median(values),
            "p95_ms": sorted(values)[min(len(values) - 1, round(0.95 * (len(values) - 1)))],
        }
        for session_id, values in times.items()
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    fill = commands.add_parser("populate")
    fill.add_argument("--cookie", required=True)
    fill.add_argument("--spec", required=True, help="JSON list of {messages, chars}")
    read = commands.add_parser("runs")
    read.add_argument("sessions", nargs="+")
    crashed = commands.add_parser("crash")
    crashed.add_argument("sessions", nargs="*")
    timed = commands.add_parser("snapshots")
    timed.add_argument("--repeats", type=int, default=200)
    timed.add_argument("sessions", nargs="+")
    args = parser.parse_args(argv)
    _setup()
    if args.command == "populate":
        result = populate(args.cookie, json.loads(args.spec))
    elif args.command == "crash":
        result = crash(args.sessions)
    elif args.command == "snapshots":
        result = snapshots(args.sessions, args.repeats)
    else:
        result = runs(args.sessions)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
