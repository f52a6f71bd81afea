"""Exporting a chat (``agent_app.export``): Markdown and JSON of the shown path, tool calls
in the JSON, files by name, a safe file name; the owner and staff only (404 for anyone
else, as for no chat)."""

from __future__ import annotations

import json
import uuid

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Permission

from agent_app.models import ChatAttachment, ChatMessage, ChatSession
from tests.app.agui_support import http_fixture  # noqa: F401 (the ``http`` fixture)
from tests.app.llm_doubles import call_tool, say
from zett_agent.testing import ScriptedModel

pytestmark = pytest.mark.django_db(transaction=True)


def export_url(session_id: str, extension: str) -> str:
    return f"/s/{session_id}/export.{extension}"


async def get(http, url: str, cookie: str):
    call = await http("GET", url, headers={"cookie": cookie})
    return call, await call.read()


async def branched_chat(sockets, cookie: str, use_model):
    """Two turns, a tool call in the first, whose first turn was answered again."""
    use_model(
        ScriptedModel(
            [
                call_tool("calculate", expression="6*7"),
                say("It is **42**."),
                say("Bye."),
                say("Forty-two, again."),
            ]
        )
    )
    socket = await sockets(cookie=cookie)
    for question in ("What is 6*7? Quick.", "Thanks"):
        await socket.send({"type": "user_message", "content": question})
        await socket.run_to_completion()
    await socket.send({"type": "regenerate", "position": 0})
    await socket.run_to_completion()
    return socket


async def test_the_owner_exports_the_shown_path_as_markdown_and_json(
    http, sockets, login_cookie, use_model
):
    _, cookie = await login_cookie("ada")
    socket = await branched_chat(sockets, cookie, use_model)
    await socket.send({"type": "switch_version", "position": 0, "index": 1})
    await socket.expect("branch_switched", index=1)

    call, body = await get(http, export_url(socket.session_id, "json"), cookie)
    assert call.status == 200
    assert call.headers["content-type"] == "application/json; charset=utf-8"
    assert call.headers["content-disposition"].startswith('attachment; filename="what-is-67-')
    assert call.headers["content-disposition"].endswith('.json"')
    document = json.loads(body)
    assert document["format"] == "zett.chat" and document["version"] == 1
    assert document["title"] == "What is 6*7"
    messages = document["messages"]
    assert [m["role"] for m in messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
    ]
    assert messages[0]["versions"] == {"index": 1, "count": 2}
    assert messages[1]["tool_calls"][0]["name"] == "calculate"
    assert messages[1]["tool_calls"][0]["arguments"] == {"expression": "6*7"}
    assert messages[2]["name"] == "calculate" and messages[2]["content"]
    assert messages[3]["content"] == "It is **42**."
    assert "Forty-two, again." not in body.decode()

    call, body = await get(http, export_url(socket.session_id, "md"), cookie)
    assert call.status == 200
    assert call.headers["content-type"] == "text/markdown; charset=utf-8"
    assert call.headers["content-disposition"].endswith('.md"')
    text = body.decode()
    assert text.startswith("# What is 6*7\n")
    assert "## You\n\nWhat is 6*7? Quick.\n" in text
    assert "Used: `calculate`" in text
    assert "It is **42**." in text and "Forty-two, again." not in text
    assert text.index("What is 6*7? Quick.") < text.index("It is **42**.") < text.index("Thanks")


async def test_files_are_named_and_staff_may_export_but_nobody_else(
    http, sockets, login_cookie, use_model
):
    _, cookie = await login_cookie("ada")
    use_model(ScriptedModel([say("Got it.")]))
    socket = await sockets(cookie=cookie)
    session_id = socket.session_id
    await socket.send({"type": "user_message", "content": "hello"})
    await socket.run_to_completion()
    file_id = await sync_to_async(add_file)(session_id)

    _, stranger_cookie = await login_cookie("eve")
    staff, staff_cookie = await login_cookie("sam")
    await sync_to_async(grant_staff)(staff)
    for extension in ("md", "json"):
        call, _ = await get(http, export_url(session_id, extension), stranger_cookie)
        assert call.status == 404
        call, _ = await get(http, export_url(str(uuid.uuid4()), extension), cookie)
        assert call.status == 404
        call, _ = await get(http, export_url(session_id, extension), staff_cookie)
        assert call.status == 200

    _, body = await get(http, export_url(session_id, "json"), cookie)
    first = json.loads(body)["messages"][0]
    assert first["attachments"] == [
        {"name": "plan.pdf", "media_type": "application/pdf", "size": 4}
    ]
    assert file_id not in body.decode()
    _, body = await get(http, export_url(session_id, "md"), cookie)
    assert "Attached: `plan.pdf`" in body.decode()


def add_file(session_id: str) -> str:
    """Attach a stored file to the chat's first message (as an upload and a send would)."""
    session = ChatSession.objects.get(pk=session_id)
    attachment = ChatAttachment.objects.create(
        session=session, name="plan.pdf", media_type="application/pdf", size=4
    )
    row = ChatMessage.objects.get(session=session, position=0)
    row.extra = {**(row.extra or {}), "attributes": {"attachments": [str(attachment.pk)]}}
    row.save(update_fields=["extra"])
    return str(attachment.pk)


def grant_staff(user) -> None:
    user.user_permissions.add(Permission.objects.get(codename="staff_chat"))


async def test_a_title_with_odd_characters_gives_a_safe_file_name(http, sockets, use_model):
    use_model(ScriptedModel([say("ok")]))
    socket = await sockets()
    await socket.send({"type": "user_message", "content": 'Résumé "q"; ../../etc/passwd\r\nX: y'})
    await socket.run_to_completion()
    cookie = dict(socket.communicator.scope["headers"])[b"cookie"].decode()
    call, _ = await get(http, export_url(socket.session_id, "md"), cookie)
    disposition = call.headers["content-disposition"]
    assert disposition.startswith('attachment; filename="resume-q-etcpasswd-')
    assert disposition.isascii() and "/" not in disposition and "\r" not in disposition
