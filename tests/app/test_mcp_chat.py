"""MCP tools in chats, end to end: real MCP servers as child processes, chats through the
consumer (``agent_app.agents.mcp``, ``agent_app.agents.elicitation``).

The servers are ``tests/runtime/mcp_test_server.py``: over streamable HTTP (every request
needs ``Authorization: Bearer <token>``; the notes tools keep one notebook per token) and
over stdio. Each logs every ``tools/call`` that reaches it, which is how a test proves a
denied call never got there. The model is scripted; everything else is real.
"""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from agent_app.assistants import Assistant, register, registry
from tests.app.conftest import answer_of, events_of, rows
from tests.app.llm_doubles import call_tool, say
from tests.runtime.mcp_support import HttpServer, SharedHttpServer, calls_in, stdio_command
from zett_agent.mcp import MCPServer
from zett_agent.testing import ScriptedModel

pytestmark = pytest.mark.django_db(transaction=True)


class McpHelper(Assistant):
    """Its notes server needs each person's own token; its local server needs none."""

    id = "mcp-helper"
    name = "MCP helper"
    mcp_no_approval = {"delete_all"}

    def mcp_headers(self, server, user):
        if server.name != "notes":
            return None
        person = "bob" if user.username == "bob" else "alice"  # the two the server knows
        return {"Authorization": f"Bearer {person}-token"}


@pytest.fixture(scope="module")
def http_server(tmp_path_factory):
    server = SharedHttpServer(tmp_path_factory.mktemp("mcp") / "http.log")
    yield server
    server.close()


@pytest.fixture
async def person(login_cookie):
    """A signed-in person's cookie (the notes server knows alice and bob)."""
    return (await login_cookie("carol"))[1]


@pytest.fixture
async def helper(sockets, http_server, tmp_path):
    """The assistant with fresh servers; their connections are closed at the end (before
    the socket fixture checks that no task is left)."""
    http_server.clear_log()
    log = tmp_path / "stdio.log"
    servers = [
        MCPServer("notes", url=http_server.url, connect_timeout=10),
        MCPServer("local", command=stdio_command(log)),
    ]
    McpHelper.mcp_servers = servers
    register(McpHelper)
    McpHelper.stdio_log = log
    yield McpHelper
    for server in servers:
        await server.aclose()
    registry.unregister(McpHelper.id)


def first(text: str) -> dict:
    return {"type": "user_message", "content": text, "assistant": McpHelper.id}


def answer(payload: dict, name: str = "ask_user_response") -> dict:
    return {"type": "external_event", "name": name, "payload": payload}


def tool_ends(frames):
    return [e for e in events_of(frames) if e["type"] in ("tool_completed", "tool_failed")]


async def approve(socket, approved: bool) -> dict:
    frames = await socket.until_event("custom", "approval_requested")
    payload = frames[-1]["event"]["payload"]
    reply = {"tool_call_id": payload["tool_call_id"], "approved": approved}
    reply["digest"] = payload["digest"]
    await socket.send({"type": "external_event", "name": "approval_response", "payload": reply})
    await socket.expect("external_event_result", accepted_by=["ConfirmationExtension"])
    return payload


async def test_a_read_only_tool_runs_without_approval(sockets, use_model, helper, person):
    use_model(ScriptedModel([call_tool("local__add", a=2, b=3), say("It is 5.")]))
    socket = await sockets(cookie=person)
    await socket.send(first("What is 2 + 3?"))
    frames = await socket.run_to_completion()
    assert answer_of(frames) == "It is 5."
    assert not [e for e in events_of(frames) if e.get("name") == "approval_requested"]
    (done,) = tool_ends(frames)
    assert done["type"] == "tool_completed"
    assert done["message"]["content"] == "5"
    assert calls_in(helper.stdio_log) == [
        {"tool": "add", "arguments": {"a": 2, "b": 3}, "token": "stdio"}
    ]


async def test_a_write_tool_waits_for_approval_and_runs_once_approved(
    sockets, use_model, helper, http_server, login_cookie
):
    _, cookie = await login_cookie("alice")
    use_model(ScriptedModel([call_tool("notes__write_note", text="buy milk"), say("Saved.")]))
    socket = await sockets(cookie=cookie)
    await socket.send(first("Note: buy milk"))
    payload = await approve(socket, True)
    assert payload["tool"] == "notes__write_note"
    assert payload["arguments"] == {"text": "buy milk"}
    frames = await socket.run_to_completion()
    (done,) = tool_ends(frames)
    assert done["message"]["content"] == "stored 'buy milk'"
    assert done["message"]["attributes"]["reply"] == {"kind": "approval", "approved": True}
    assert calls_in(http_server.log) == [
        {"tool": "write_note", "arguments": {"text": "buy milk"}, "token": "alice-token"}
    ]


async def test_a_denied_call_never_reaches_the_server(
    sockets, use_model, helper, http_server, login_cookie
):
    _, cookie = await login_cookie("alice")
    use_model(ScriptedModel([call_tool("notes__write_note", text="secret"), say("Not saved.")]))
    socket = await sockets(cookie=cookie)
    await socket.send(first("Note: secret"))
    await approve(socket, False)
    frames = await socket.run_to_completion()
    (failed,) = tool_ends(frames)
    assert failed["type"] == "tool_failed"
    assert "denied" in failed["message"]["content"]
    assert calls_in(http_server.log) == []  # the server's own log: it never got there


async def test_mcp_no_approval_exempts_a_tool_by_its_own_name(sockets, use_model, helper, person):
    from agent_app.agents.mcp import approval_names

    names = approval_names(registry.get(McpHelper.id))
    assert "local__write_note" in names  # no annotations: needs approval
    assert "local__delete_all" not in names  # listed in mcp_no_approval
    assert "local__add" in names  # not listed yet: needs approval until the server says so
    use_model(ScriptedModel([call_tool("local__add", a=1, b=1), say("2")]))
    socket = await sockets(cookie=person)
    await socket.send(first("1 + 1?"))
    await socket.run_to_completion()
    assert "local__add" not in names  # listed now: annotated read-only


async def test_two_people_each_see_only_their_own_notes(
    sockets, use_model, helper, http_server, login_cookie
):
    _, alice_cookie = await login_cookie("alice")
    _, bob_cookie = await login_cookie("bob")
    use_model(
        ScriptedModel(
            [
                call_tool("notes__write_note", "w1", text="alice's plan"),
                say("Saved."),
                call_tool("notes__read_notes", "r1"),
                say("Bob's notes."),
                call_tool("notes__read_notes", "r2"),
                say("Alice's notes."),
            ]
        )
    )
    alice_socket = await sockets(cookie=alice_cookie)
    await alice_socket.send(first("Save my plan"))
    await approve(alice_socket, True)
    await alice_socket.run_to_completion()

    bob_socket = await sockets(cookie=bob_cookie)
    await bob_socket.send(first("What are my notes?"))
    (bobs,) = tool_ends(await bob_socket.run_to_completion())
    assert "alice's plan" not in bobs["message"]["content"]

    await alice_socket.send({"type": "user_message", "content": "And mine?"})
    (alices,) = tool_ends(await alice_socket.run_to_completion())
    assert "alice's plan" in alices["message"]["content"]

    tokens = [(call["tool"], call["token"]) for call in calls_in(http_server.log)]
    assert tokens == [
        ("write_note", "alice-token"),
        ("read_notes", "bob-token"),
        ("read_notes", "alice-token"),
    ]
    assert helper.mcp_servers[0].connection_count == 2  # one each, never shared


@pytest.mark.slow
async def test_the_http_server_restarted_mid_chat_and_the_next_call_works(
    sockets, use_model, tmp_path, login_cookie
):
    server = HttpServer(tmp_path / "restart.log")
    await server.start()
    notes = MCPServer("notes", url=server.url, backoff=0.05, max_backoff=0.2)
    McpHelper.mcp_servers = [notes]
    register(McpHelper)
    try:
        _, cookie = await login_cookie("alice")
        use_model(
            ScriptedModel(
                [
                    call_tool("notes__read_notes", "r1"),
                    say("None yet."),
                    call_tool("notes__read_notes", "r2"),
                    say("Still none."),
                ]
            )
        )
        socket = await sockets(cookie=cookie)
        await socket.send(first("My notes?"))
        (before,) = tool_ends(await socket.run_to_completion())
        assert before["type"] == "tool_completed"
        await server.kill()
        await server.start()  # the same port; the old session is unknown there
        await socket.send({"type": "user_message", "content": "And now?"})
        (after,) = tool_ends(await socket.run_to_completion())
        assert after["type"] == "tool_completed", after
        assert [call["tool"] for call in calls_in(server.log)] == ["read_notes", "read_notes"]
    finally:
        await notes.aclose()
        await server.kill()
        registry.unregister(McpHelper.id)


async def test_an_elicitation_is_a_question_answered_on_the_page(
    sockets, use_model, helper, person
):
    use_model(ScriptedModel([call_tool("local__delete_all"), say("Done.")]))
    socket = await sockets(cookie=person)
    await socket.send(first("Delete everything"))
    frames = await socket.until_event("custom", "ask_user")
    question = frames[-1]["event"]["payload"]
    # A standard ask_user question, so any client answers it; the MCP fields beside it.
    assert question["question"] == "Why delete everything?"
    assert (question["options"], question["allow_multiple"]) == (None, False)
    assert question["response_event"] == "ask_user_response"
    assert (question["source"], question["server"]) == ("mcp", "local")
    assert question["tool"] == "local__delete_all"
    assert question["call_id"] == "call-1"
    assert question["tool_call_id"].startswith("call-1.mcp-")
    assert question["requested_schema"]["properties"]["reason"]["type"] == "string"
    assert question["expires_at"]  # ZETT_REPLY_TIMEOUT: a deadline
    wait_id = question["tool_call_id"]
    pending = (await sockets(socket.session_id, cookie=person)).session_frame
    assert pending["active_request_id"] == frames[0]["request_id"]

    wrong = {"tool_call_id": wait_id, "answer": {"reason": 5}}
    await socket.send(answer(wrong))
    refused = await socket.expect("external_event_result", accepted_by=[], reason="invalid")
    assert refused["message"].startswith(
        "the answer does not fit the question: the field 'reason': 5 is not"
    )
    bad_action = {"tool_call_id": wait_id, "answer": "spring", "action": "maybe"}
    await socket.send(answer(bad_action))
    refused = await socket.expect("external_event_result", accepted_by=[], reason="invalid")
    assert "action must be one of accept, decline, cancel" in refused["message"]
    reply = {"tool_call_id": wait_id, "answer": "spring"}  # the schema's single field
    await socket.send(answer(reply))
    taken = await socket.expect(
        "external_event_result", correlation_id=wait_id, accepted_by=["MCPElicitationExtension"]
    )
    assert "message" not in taken
    frames = await socket.run_to_completion()
    (done,) = tool_ends(frames)
    assert done["message"]["content"] == "deleted because spring"
    assert done["message"]["attributes"]["reply"] == {
        "kind": "ask_user",
        "source": "mcp",
        "question": "Why delete everything?",
        "action": "accept",
        "answer": {"reason": "spring"},
    }
    from agent_app.models import ReplyWait

    wait = await ReplyWait.objects.aget(tool_call_id=wait_id)
    assert (wait.kind, wait.status) == ("ask_user", "done")
    assert [role for role, _ in await rows(socket.session_id)][-2:] == ["tool", "assistant"]


async def test_a_declined_elicitation_is_told_to_the_server(sockets, use_model, helper, person):
    use_model(ScriptedModel([call_tool("local__delete_all"), say("Kept.")]))
    socket = await sockets(cookie=person)
    await socket.send(first("Delete everything"))
    frames = await socket.until_event("custom", "ask_user")
    wait_id = frames[-1]["event"]["payload"]["tool_call_id"]
    reply = {"tool_call_id": wait_id, "action": "decline"}
    await socket.send(answer(reply, "mcp_elicitation_response"))  # the older name still works
    await socket.expect("external_event_result", accepted_by=["MCPElicitationExtension"])
    (done,) = tool_ends(await socket.run_to_completion())
    assert done["message"]["content"] == "kept (decline)"


async def test_recovery_asks_for_the_approval_of_an_mcp_call_that_never_asked(helper):
    """A worker that died between the model's answer and the approval: the next one asks."""
    from agent_app.agents.factory import describe_wait
    from agent_app.models import ChatSession
    from zett_agent.extensions.approval import digest_of
    from zett_agent.messages import ToolCall

    chat = await ChatSession.objects.acreate(assistant=McpHelper.id)
    call = ToolCall("c9", "notes__write_note", {"text": "later"})
    name, payload = await sync_to_async(describe_wait)(str(chat.pk), call)
    assert name == "approval_requested"
    assert payload["tool"] == "notes__write_note"
    assert payload["digest"] == digest_of("notes__write_note", {"text": "later"})
    read_only = ToolCall("c8", "local__delete_all", {})  # in mcp_no_approval
    assert await sync_to_async(describe_wait)(str(chat.pk), read_only) is None


async def test_an_unanswered_question_is_cancelled_at_its_deadline(
    sockets, use_model, helper, person, settings
):
    settings.ZETT_REPLY_TIMEOUT = 1
    use_model(ScriptedModel([call_tool("local__delete_all"), say("Kept.")]))
    socket = await sockets(cookie=person)
    await socket.send(first("Delete everything"))
    frames = await socket.until_event("custom", "ask_user")
    wait_id = frames[-1]["event"]["payload"]["tool_call_id"]
    (done,) = tool_ends(await socket.run_to_completion())  # the deadline answers for nobody
    assert done["message"]["content"] == "kept (cancel)"
    assert done["message"]["attributes"]["reply"]["expired"] is True
    from agent_app.models import ReplyWait

    assert (await ReplyWait.objects.aget(tool_call_id=wait_id)).status == "expired"


async def test_stopping_the_run_ends_the_question(sockets, use_model, helper, person):
    use_model(ScriptedModel([call_tool("local__delete_all"), say("never")]))
    socket = await sockets(cookie=person)
    await socket.send(first("Delete everything"))
    frames = await socket.until_event("custom", "ask_user")
    wait_id = frames[-1]["event"]["payload"]["tool_call_id"]
    await socket.send({"type": "cancel"})
    await socket.until(lambda frame: frame["type"] == "run_cancelled")
    reply = {"tool_call_id": wait_id, "action": "decline"}
    await socket.send(answer(reply))
    late = await socket.until(lambda frame: frame["type"] == "external_event_result")
    assert late[-1]["accepted_by"] == []
    from agent_app.models import ReplyWait

    assert (await ReplyWait.objects.aget(tool_call_id=wait_id)).status == "cancelled"


async def test_over_ag_ui_an_mcp_question_is_an_input_required_interrupt_answered_by_resume(
    sockets, use_model, helper, person
):
    """The stream of a run whose server asks ends in the interrupt any question gives, and a
    resume with a text answers the schema's single field."""
    from tests.app.test_agui_encoder import Recording, _answer_over_agui

    use_model(ScriptedModel([call_tool("local__delete_all"), say("Done.")]))
    socket = await sockets(cookie=person)
    recording = Recording(socket.session_id)
    await socket.send(first("Delete everything"))
    recording.add(await socket.until_event("custom", "ask_user"))
    finished = recording.live()[-1].data
    assert finished["type"] == "RUN_FINISHED"
    (interrupt,) = finished["outcome"]["interrupts"]
    assert interrupt["reason"] == "input_required"
    assert interrupt["id"].startswith("call-1.mcp-")
    assert interrupt["message"] == "Why delete everything?"
    await _answer_over_agui(socket, recording, {interrupt["id"]: "ask_user"}, {"answer": "tidy"})
    (done,) = tool_ends(await socket.run_to_completion())
    assert done["message"]["content"] == "deleted because tidy"


@pytest.mark.slow
async def test_two_people_are_asked_at_once_by_one_legacy_stdio_server(
    sockets, use_model, tmp_path, login_cookie
):
    """A server on the older protocol cannot say which call asks; each person has a child
    of their own, so both questions are asked and both answers reach the right call."""
    server = MCPServer("local", command=stdio_command(tmp_path / "legacy.log"), mode="legacy")
    McpHelper.mcp_servers = [server]
    register(McpHelper)
    try:
        use_model(
            ScriptedModel(
                [
                    call_tool("local__delete_all", "a1"),
                    call_tool("local__delete_all", "b1"),
                    say("Done."),
                    say("Done."),
                ]
            )
        )
        _, alice_cookie = await login_cookie("alice")
        _, bob_cookie = await login_cookie("bob")
        alice = await sockets(cookie=alice_cookie)
        await alice.send(first("Delete everything"))
        alice_question = (await alice.until_event("custom", "ask_user"))[-1]["event"]["payload"]
        bob = await sockets(cookie=bob_cookie)
        await bob.send(first("Delete everything"))
        bob_question = (await bob.until_event("custom", "ask_user"))[-1]["event"]["payload"]
        await bob.send(answer({"tool_call_id": bob_question["tool_call_id"], "answer": "bob"}))
        await alice.send(
            answer({"tool_call_id": alice_question["tool_call_id"], "answer": "alice"})
        )
        (bobs,) = tool_ends(await bob.run_to_completion())
        (alices,) = tool_ends(await alice.run_to_completion())
        assert bobs["message"]["content"] == "deleted because bob"
        assert alices["message"]["content"] == "deleted because alice"
        assert server.connection_count == 2
    finally:
        await server.aclose()
        registry.unregister(McpHelper.id)
