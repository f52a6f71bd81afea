"""MCP over streamable HTTP: a real ``mcp`` server checking a bearer header, as a child.

Per-person connections (two header sets, two connections, each sees only its own data),
a server killed and restarted mid-session, elicitations answered through external events
(both protocol generations: answered in the calling task on 2026-07-28, in the
connection's reader on 2025-11-25), idle close, and a shutdown that leaves no task.
"""

from __future__ import annotations

import asyncio

import pytest

from zett_agent.extensions.external import ExternalEvent
from zett_agent.mcp import MCPConnectionError, MCPElicitationEvent, MCPServer

from .mcp_support import (
    HttpServer,
    SharedHttpServer,
    T,
    calls_in,
    free_port,
    listings_in,
    run_calls,
    tool_call,
    tool_results,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def shared_http(tmp_path_factory):
    """One server for the tests that do not stop it."""
    server = SharedHttpServer(tmp_path_factory.mktemp("mcp") / "calls.jsonl")
    yield server
    server.close()


@pytest.fixture
def http(shared_http):
    shared_http.clear_log()
    return shared_http


@pytest.fixture
async def own_http(tmp_path):
    """A server of this test's own, which it may kill and restart."""
    server = HttpServer(tmp_path / "calls.jsonl")
    await server.start()
    yield server
    await server.kill()


def bearer_of_person(context):
    """The headers of the request's person (the app's ``mcp_headers`` seam)."""
    person = context.metadata["person"] if context is not None else "alice"
    return {"Authorization": f"Bearer {person}-token"}


async def test_the_bearer_header_reaches_the_server(http):
    async with MCPServer("notes", url=http.url, headers=bearer_of_person) as server:
        events, _ = await run_calls(
            {"extensions": [server]},
            tool_call("notes__add", a=1, b=2),
            metadata={"person": "alice"},
        )
    assert tool_results(events)[0].content == "3"
    assert calls_in(http.log) == [
        {"tool": "add", "arguments": {"a": 1, "b": 2}, "token": "alice-token"}
    ]


async def test_a_refused_bearer_is_a_clear_connection_error_at_once(http):
    """A 401 is not an unreachable server: the caller hears it now, not after
    ``connect_timeout``, and the next call tries again once."""
    async with MCPServer(
        "notes", url=http.url, headers={"Authorization": "Bearer nobody"}, connect_timeout=60
    ) as server:
        for _ in range(2):
            with pytest.raises(MCPConnectionError, match=r"'notes' refused .*\(HTTP 401\)"):
                await asyncio.wait_for(server.tools(), 20)  # far under connect_timeout
    assert calls_in(http.log) == []


async def test_two_people_get_two_connections_and_see_only_their_own_data(http):
    async with MCPServer("notes", url=http.url, headers=bearer_of_person) as server:
        for person, note in (("alice", "alice's secret"), ("bob", "bob's secret")):
            events, _ = await run_calls(
                {"extensions": [server]},
                tool_call("notes__write_note", text=note),
                session=f"{person}-1",
                metadata={"person": person},
            )
            assert tool_results(events)[0].success is True
        assert server.connection_count == 2
        seen = {}
        for person in ("alice", "bob"):
            events, _ = await run_calls(
                {"extensions": [server]},
                tool_call("notes__read_notes"),
                session=f"{person}-2",
                metadata={"person": person},
            )
            seen[person] = tool_results(events)[0].attributes["mcp_structured_content"]
    assert seen == {"alice": {"result": ["alice's secret"]}, "bob": {"result": ["bob's secret"]}}
    tokens = {(entry["tool"], entry["token"]) for entry in calls_in(http.log)}
    assert ("read_notes", "alice-token") in tokens and ("read_notes", "bob-token") in tokens


async def test_with_a_person_key_people_never_share_a_connection_even_with_equal_headers(http):
    async with MCPServer(
        "notes",
        url=http.url,
        headers={"Authorization": "Bearer alice-token"},
        person_key=lambda context: context.metadata["person"] if context else None,
    ) as server:
        for person in ("ann", "ben", "ann"):
            events, _ = await run_calls(
                {"extensions": [server]},
                tool_call("notes__add", a=1, b=1),
                session=person,
                metadata={"person": person},
            )
            assert tool_results(events)[0].content == "2"
        assert server.connection_count == 2


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_server_killed_and_restarted_mid_session_the_next_call_works(own_http, mode):
    async with MCPServer(
        "notes", url=own_http.url, headers=bearer_of_person, mode=mode, backoff=0.05
    ) as server:
        agent_kwargs = {"extensions": [server]}
        first, _ = await run_calls(
            agent_kwargs, tool_call("notes__add", a=1, b=1), metadata={"person": "alice"}
        )
        assert tool_results(first)[0].content == "2"
        await own_http.kill()
        await own_http.start()
        again, _ = await run_calls(
            agent_kwargs,
            tool_call("notes__add", a=2, b=2),
            session="s2",
            metadata={"person": "alice"},
        )
        assert tool_results(again)[0].success is True, tool_results(again)[0].content
        assert tool_results(again)[0].content == "4"
    assert [entry["arguments"] for entry in calls_in(own_http.log)] == [
        {"a": 1, "b": 1},
        {"a": 2, "b": 2},
    ]


def answering(*replies, name="ask_user_response", key="tool_call_id"):
    """An on_event hook that answers each question (an ``ask_user`` event) with the next
    reply payload(s), sent as ``name`` and correlated by ``key``."""
    verdicts = []
    questions = []

    def on_event(agent, config, event):
        if event.type is T.CUSTOM and event.name == "ask_user":
            questions.append(event)
            for payload in replies[len(questions) - 1]:
                reply = ExternalEvent(name, {key: event.payload[key], **payload})
                verdicts.append(agent.emit_external_event(reply, config=config))

    return on_event, questions, verdicts


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_an_elicitation_is_answered_through_an_external_event(http, mode):
    on_event, questions, verdicts = answering(
        [
            {"answer": {"wrong": "field"}},  # refused: schema mismatch
            {"answer": "x", "action": "maybe"},  # refused: no such action
            {"answer": "spring cleaning"},  # the schema's single field
        ]
    )
    async with MCPServer("notes", url=http.url, headers=bearer_of_person, mode=mode) as server:
        events, _ = await run_calls(
            {"extensions": [server]},
            tool_call("notes__delete_all", call_id="del-1"),
            metadata={"person": "alice"},
            on_event=on_event,
        )
    (question,) = questions
    assert isinstance(question, MCPElicitationEvent)
    assert question.question == "Why delete everything?"
    payload = question.payload
    assert (payload["options"], payload["allow_multiple"]) == (None, False)
    assert payload["response_event"] == "ask_user_response"
    assert payload["tool_call_id"].startswith("del-1.mcp-")
    assert (payload["source"], payload["call_id"]) == ("mcp", "del-1")
    assert payload["tool"] == "notes__delete_all"
    assert question.requested_schema["properties"]["reason"]["type"] == "string"
    assert verdicts == [[], [], ["notes"]]
    (result,) = tool_results(events)
    assert result.content == "deleted because spring cleaning"


async def test_a_declined_elicitation_is_told_to_the_server(http):
    # The older reply name, correlated by elicitation_id, is still taken.
    on_event, _, verdicts = answering(
        [{"action": "decline"}], name="mcp_elicitation_response", key="elicitation_id"
    )
    async with MCPServer("notes", url=http.url, headers=bearer_of_person) as server:
        events, _ = await run_calls(
            {"extensions": [server]},
            tool_call("notes__delete_all"),
            metadata={"person": "alice"},
            on_event=on_event,
        )
    assert verdicts == [["notes"]]
    assert tool_results(events)[0].content == "kept (decline)"


async def test_an_unanswered_elicitation_is_cancelled_at_its_deadline(http):
    questions = []

    def on_event(agent, config, event):
        if event.type is T.CUSTOM:
            questions.append(event)

    async with MCPServer(
        "notes", url=http.url, headers=bearer_of_person, elicitation_timeout=0.3
    ) as server:
        events, _ = await run_calls(
            {"extensions": [server]},
            tool_call("notes__delete_all"),
            metadata={"person": "alice"},
            on_event=on_event,
        )
    assert "expires_at" in questions[0].payload
    assert tool_results(events)[0].content == "kept (cancel)"


async def test_an_elicitation_callback_answers_instead_of_the_external_wait(http):
    asked = []

    async def answer(request):
        asked.append(request)
        from zett_agent.mcp import ElicitationAnswer

        return ElicitationAnswer("accept", {"reason": "the callback said so"})

    async with MCPServer(
        "notes", url=http.url, headers=bearer_of_person, elicitation=answer
    ) as server:
        events, _ = await run_calls(
            {"tools": await server.tools(), "extensions": []},
            tool_call("notes__delete_all"),
            metadata={"person": "alice"},
        )
    assert tool_results(events)[0].content == "deleted because the callback said so"
    assert asked[0].server == "notes" and asked[0].tool_call_id == "c1"


async def test_an_idle_connection_is_closed_and_the_next_call_opens_a_new_one(http):
    async with MCPServer(
        "notes", url=http.url, headers=bearer_of_person, idle_timeout=0.2
    ) as server:
        await server.tools()
        (connection,) = server._connections.values()
        await connection._task  # the owner ends by itself once idle
        assert server.connection_count == 0
        events, _ = await run_calls(
            {"extensions": [server]},
            tool_call("notes__add", a=3, b=4),
            metadata={"person": "alice"},
        )
        assert tool_results(events)[0].content == "7"


async def test_shutdown_closes_every_connection_and_leaves_no_task(http):
    before = set(asyncio.all_tasks())
    server = MCPServer("notes", url=http.url, headers=bearer_of_person)
    for person in ("alice", "bob"):
        await run_calls(
            {"extensions": [server]},
            tool_call("notes__add", a=1, b=1),
            session=person,
            metadata={"person": person},
        )
    assert server.connection_count == 2
    owners = [t for t in asyncio.all_tasks() - before if t.get_name() == "zett-mcp-notes"]
    assert len(owners) == 2
    await server.aclose()
    assert server.connection_count == 0
    assert all(owner.done() for owner in owners)
    assert [t for t in asyncio.all_tasks() - before if not t.done()] == []
    with pytest.raises(MCPConnectionError, match="shut down"):
        await server.tools()


async def test_a_call_lost_after_it_was_sent_is_not_repeated(own_http):
    async with MCPServer(
        "notes", url=own_http.url, headers=bearer_of_person, backoff=0.05, connect_timeout=3
    ) as server:
        events, _ = await run_calls(
            {"extensions": [server]}, tool_call("notes__crash"), metadata={"person": "alice"}
        )
        (result,) = tool_results(events)
        assert result.success is False
        assert "may or may not have run" in result.content
        assert [entry["tool"] for entry in calls_in(own_http.log)] == ["crash"]
        await own_http.kill()  # reap the crashed process
        await own_http.start()
        again, _ = await run_calls(
            {"extensions": [server]},
            tool_call("notes__add", a=5, b=5),
            session="s2",
            metadata={"person": "alice"},
        )
        assert tool_results(again)[0].content == "10"
    assert [entry["tool"] for entry in calls_in(own_http.log)] == ["crash", "add"]


async def test_a_server_that_goes_down_fails_the_call_fast_with_a_clear_error(own_http):
    """Nothing listening is known at the first attempt: the call does not wait out the
    (default, 30 s) connect timeout."""
    async with MCPServer("notes", url=own_http.url, headers=bearer_of_person) as server:
        tools = await server.tools()
        await own_http.kill()
        loop = asyncio.get_running_loop()
        started = loop.time()
        events, _ = await run_calls(
            {"tools": tools, "extensions": []},
            tool_call("notes__add", a=1, b=2),
            metadata={"person": "alice"},
        )
        assert loop.time() - started <= 3
        (result,) = tool_results(events)
        assert result.success is False
        assert "MCP server 'notes' is unreachable" in result.content
        assert "ConnectError" in result.content
    assert calls_in(own_http.log) == []


async def test_a_server_that_was_never_up_fails_in_under_three_seconds():
    server = MCPServer("down", url=f"http://127.0.0.1:{free_port()}/mcp")
    loop = asyncio.get_running_loop()
    started = loop.time()
    async with server:
        with pytest.raises(MCPConnectionError, match="'down' is unreachable"):
            await server.tools()
        events, _ = await run_calls({"extensions": [server]}, tool_call("down__anything"))
    assert loop.time() - started <= 3
    (result,) = tool_results(events)
    assert result.success is False


async def test_cancelling_a_run_during_a_call_ends_the_wait_and_leaves_no_task(http):
    async with MCPServer("notes", url=http.url, headers=bearer_of_person) as server:
        started = asyncio.Event()

        def on_event(agent, config, event):
            if event.type is T.TOOL_STARTED:
                started.set()

        run = asyncio.create_task(
            run_calls(
                {"extensions": [server]},
                tool_call("notes__slow"),
                metadata={"person": "alice"},
                on_event=on_event,
            )
        )
        await started.wait()
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        events, _ = await run_calls(
            {"extensions": [server]},
            tool_call("notes__add", a=1, b=1),
            session="s2",
            metadata={"person": "alice"},
        )
        assert tool_results(events)[0].content == "2"  # the connection survived


async def test_cancelling_a_run_during_an_elicitation_ends_the_wait(http):
    async with MCPServer("notes", url=http.url, headers=bearer_of_person, mode="legacy") as server:
        asked = asyncio.Event()

        def on_event(agent, config, event):
            if event.type is T.CUSTOM:
                asked.set()

        run = asyncio.create_task(
            run_calls(
                {"extensions": [server]},
                tool_call("notes__delete_all"),
                metadata={"person": "alice"},
                on_event=on_event,
            )
        )
        await asked.wait()
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run


async def test_a_call_past_call_timeout_fails_clearly_and_the_connection_stays_usable(http):
    # call_timeout bounds every request (listing included): generous enough for a loaded
    # machine, while the slow tool never answers at all.
    async with MCPServer("notes", url=http.url, headers=bearer_of_person, call_timeout=3) as server:
        events, _ = await run_calls(
            {"extensions": [server]},
            tool_call("notes__slow", "c1"),
            tool_call("notes__add", "c2", a=2, b=3),
            metadata={"person": "alice"},
        )
    slow, added = tool_results(events)
    assert slow.success is False
    assert "timed out" in slow.content.lower() or "timeout" in slow.content.lower(), slow.content
    assert added.content == "5"
    # The same session served both: a reconnect would have listed the tools again.
    assert listings_in(http.log) == 1


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_progress_and_log_lines_over_http_become_tool_progress_events(http, mode):
    async with MCPServer("notes", url=http.url, headers=bearer_of_person, mode=mode) as server:
        events, _ = await run_calls(
            {"extensions": [server]},
            tool_call("notes__count_to", n=2),
            metadata={"person": "alice"},
        )
    updates = [e.payload for e in events if e.type is T.CUSTOM and e.name == "tool_progress"]
    assert (updates[-1]["progress"], updates[-1]["total"]) == (2, 2)
    assert (updates[-1]["message"], updates[-1]["level"]) == ("counted 2", "info")
    assert tool_results(events)[0].content == "counted to 2"
