"""Conversations that branch, over the real socket: ``edit`` any turn, ``regenerate`` any
answer, ``switch_version`` between them; the model only ever reads the shown path."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async

from agent_app.models import ChatMessage, ChatRun
from tests.app.llm_doubles import GatedModel, completed, say
from zett_agent.model import ModelEvent
from zett_agent.testing import ScriptedModel

pytestmark = pytest.mark.django_db(transaction=True)


def conversation(request) -> list[str]:
    return [m.content for m in request.messages if m.role.value in ("user", "assistant")]


def contents(items: list[dict]) -> list[str]:
    return [item["content"] for item in items]


async def three_turns(sockets, use_model, *later: str):
    """A chat of three turns (q1 a1 q2 a2 q3 a3), answers for ``later`` runs scripted."""
    answers = ["a1", "a2", "a3", *later]
    model = use_model(ScriptedModel([say(text) for text in answers]))
    socket = await sockets()
    for question in ("q1", "q2", "q3"):
        await socket.send({"type": "user_message", "content": question})
        await socket.run_to_completion()
    return model, socket


async def stored() -> list[tuple]:
    """Every stored row as it stands (what a refusal must leave alone)."""
    fields = ("pk", "position", "content", "superseded", "chosen", "version", "versions")
    return await sync_to_async(
        lambda: list(ChatMessage.objects.order_by("pk").values_list(*fields))
    )()


async def test_edit_turn_one_of_three_then_switch_back_finds_the_three_turns_whole(
    sockets, use_model
):
    model, socket = await three_turns(sockets, use_model, "about cats", "and then")
    await socket.send({"type": "edit", "position": 0, "content": "cats?"})
    started = await socket.expect("run_started", kind="edit", position=0, superseded_from=0)
    assert started["content"] == "cats?"
    switched = await socket.expect("branch_switched", position=0, index=2, has_more=False)
    assert switched["seq"] == started["seq"] + 1
    (first,) = switched["messages"]
    assert (first["content"], first["versions"]) == ("cats?", {"index": 2, "count": 2})
    await socket.run_to_completion()
    assert conversation(model.requests[3]) == ["cats?"]

    other = await sockets(socket.session_id)
    assert contents(other.session_frame["history"]) == ["cats?", "about cats"]
    assert other.session_frame["history"][0]["versions"] == {"index": 2, "count": 2}

    await socket.send({"type": "switch_version", "position": 0, "index": 1})
    back = await socket.expect("branch_switched", position=0, index=1, has_more=False)
    assert contents(back["messages"]) == ["q1", "a1", "q2", "a2", "q3", "a3"]
    assert [item["position"] for item in back["messages"]] == [0, 1, 2, 3, 4, 5]
    assert back["messages"][0]["versions"] == {"index": 1, "count": 2}
    assert "versions" not in back["messages"][2]
    assert (await other.expect("branch_switched", seq=back["seq"]))["messages"] == back["messages"]

    # A message now continues the shown version: the model reads that path only.
    await socket.send({"type": "user_message", "content": "q4"})
    started = await socket.expect("run_started", position=6)
    await socket.run_to_completion()
    assert conversation(model.requests[4]) == ["q1", "a1", "q2", "a2", "q3", "a3", "q4"]
    again = await sockets(socket.session_id)
    assert contents(again.session_frame["history"])[-2:] == ["q4", "and then"]


async def test_regenerate_turn_two_and_the_third_turn_lives_on_version_one(sockets, use_model):
    model, socket = await three_turns(sockets, use_model, "a2 again", "after")
    await socket.send({"type": "regenerate", "position": 2})
    started = await socket.expect("run_started", kind="regenerate", position=2)
    assert (started["content"], started["superseded_from"]) == ("q2", 2)
    await socket.expect("branch_switched", position=2, index=2)
    await socket.run_to_completion()
    assert conversation(model.requests[3]) == ["q1", "a1", "q2"]

    await socket.send({"type": "switch_version", "position": 2, "index": 1})
    one = await socket.expect("branch_switched", position=2, index=1)
    assert contents(one["messages"]) == ["q2", "a2", "q3", "a3"]
    await socket.send({"type": "switch_version", "position": 2, "index": 2})
    two = await socket.expect("branch_switched", position=2, index=2)
    assert contents(two["messages"]) == ["q2", "a2 again"]
    assert two["messages"][0]["versions"] == {"index": 2, "count": 2}
    assert two["messages"][0]["id"] != one["messages"][0]["id"]

    await socket.send({"type": "user_message", "content": "q3b"})
    await socket.run_to_completion()
    assert conversation(model.requests[4]) == ["q1", "a1", "q2", "a2 again", "q3b"]


async def test_a_switch_further_up_comes_back_to_the_version_shown_below(sockets, use_model):
    _, socket = await three_turns(sockets, use_model, "a3 again", "cats")
    await socket.send({"type": "regenerate", "position": 4})
    await socket.run_to_completion()
    await socket.send({"type": "edit", "position": 0, "content": "q1b"})
    await socket.run_to_completion()
    await socket.send({"type": "switch_version", "position": 0, "index": 1})
    back = await socket.expect("branch_switched", index=1)
    assert contents(back["messages"]) == ["q1", "a1", "q2", "a2", "q3", "a3 again"]
    assert back["messages"][4]["versions"] == {"index": 2, "count": 2}


async def test_every_bad_position_or_index_is_refused_and_changes_nothing(sockets, use_model):
    _, socket = await three_turns(sockets, use_model, "a2 again")
    await socket.send({"type": "regenerate", "position": 2})
    await socket.run_to_completion()
    before, runs = await stored(), await ChatRun.objects.acount()
    refused = [
        {"type": "edit", "position": 1, "content": "x"},  # an answer, not a user message
        {"type": "edit", "position": 99, "content": "x"},
        {"type": "edit", "position": -1, "content": "x"},
        {"type": "edit", "position": "0", "content": "x"},
        {"type": "edit", "position": True, "content": "x"},
        {"type": "edit", "position": 0, "content": "  "},
        {"type": "edit", "content": "x"},
        {"type": "regenerate", "position": 3},
        {"type": "regenerate", "position": 40},
        {"type": "switch_version", "position": 2, "index": 0},
        {"type": "switch_version", "position": 2, "index": 3},
        {"type": "switch_version", "position": 0, "index": 2},  # a turn with one version
        {"type": "switch_version", "position": 1, "index": 1},
        {"type": "switch_version", "position": 2},
        {"type": "switch_version", "position": 2, "index": 1.5},
    ]
    for frame in refused:
        await socket.send(frame)
        error = await socket.expect_error("bad_frame")
        assert str(frame.get("position", "position")) in error["message"] or error["message"]
    await socket.assert_quiet()
    assert await stored() == before
    assert await ChatRun.objects.acount() == runs
    other = await sockets(socket.session_id)
    assert contents(other.session_frame["history"]) == ["q1", "a1", "q2", "a2 again"]


async def test_the_refusals_say_what_is_wrong(sockets, use_model):
    _, socket = await three_turns(sockets, use_model)
    await socket.send({"type": "edit", "position": 1, "content": "x"})
    assert "not a user message" in (await socket.expect_error("bad_frame"))["message"]
    await socket.send({"type": "switch_version", "position": 0, "index": 2})
    assert "has 1 version" in (await socket.expect_error("bad_frame"))["message"]
    await socket.send({"type": "edit", "position": 7, "content": "x"})
    assert "position 7" in (await socket.expect_error("bad_frame"))["message"]


async def test_two_sockets_see_the_same_edit_and_the_same_switch(sockets, use_model):
    _, socket = await three_turns(sockets, use_model, "new")
    other = await sockets(socket.session_id)
    await socket.send({"type": "edit", "position": 2, "content": "q2b"})
    for each in (socket, other):
        started = await each.expect("run_started", position=2)
        switched = await each.expect("branch_switched", position=2, index=2)
        assert switched["seq"] == started["seq"] + 1
        await each.run_to_completion()
    await other.send({"type": "switch_version", "position": 2, "index": 1})
    seen = [await each.expect("branch_switched", position=2, index=1) for each in (other, socket)]
    assert seen[0] == seen[1]
    assert contents(seen[0]["messages"]) == ["q2", "a2", "q3", "a3"]
    assert seen[0]["seq"] > switched["seq"]
    # A socket that joins later reads the switched path and a seq past the switch.
    late = await sockets(socket.session_id)
    assert contents(late.session_frame["history"]) == ["q1", "a1", "q2", "a2", "q3", "a3"]
    assert late.session_frame["last_seq"] >= seen[0]["seq"]


async def test_during_a_run_an_edit_or_a_switch_is_busy_and_changes_nothing(sockets, use_model):
    gate = asyncio.Event()
    model = use_model(
        GatedModel(
            [completed("a1")],
            [completed("a1 again")],
            [ModelEvent.text("half"), gate, completed("half done")],
        )
    )
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "q1"})
    await socket.run_to_completion()
    await socket.send({"type": "regenerate", "position": 0})
    await socket.run_to_completion()
    await socket.send({"type": "user_message", "content": "q2"})
    await socket.expect("run_started")
    await model.started.wait()
    before = await stored()
    await socket.until(lambda frame: frame["type"] == "agent_event")
    for frame in (
        {"type": "edit", "position": 0, "content": "x"},
        {"type": "regenerate", "position": 0},
        {"type": "switch_version", "position": 0, "index": 1},
    ):
        await socket.send(frame)
        await socket.until(lambda frame: frame["type"] == "error" and frame["code"] == "busy")
    gate.set()
    await socket.run_to_completion()
    assert [row[:4] for row in await stored()][: len(before)] == [row[:4] for row in before]
    assert conversation(model.requests[2]) == ["q1", "a1 again", "q2"]


async def test_history_pages_walk_the_shown_path_only(sockets, use_model, settings):
    settings.ZETT_HISTORY_PAGE = 2
    _, socket = await three_turns(sockets, use_model, "a1 again")
    await socket.send({"type": "regenerate", "position": 0})
    await socket.run_to_completion()
    await socket.send({"type": "switch_version", "position": 0, "index": 1})
    switched = await socket.expect("branch_switched", position=0, index=1)
    # The path from position 0 on is longer than a page: its newest part comes, the rest
    # is paged with history_before.
    assert (contents(switched["messages"]), switched["has_more"]) == (["q3", "a3"], True)
    await socket.send({"type": "history_before", "position": 4, "limit": 10})
    page = await socket.expect("history_page", has_more=False)
    assert contents(page["messages"]) == ["q1", "a1", "q2", "a2"]
    assert page["messages"][0]["versions"] == {"index": 1, "count": 2}
    ids = [item["id"] for item in page["messages"]]
    assert ids == sorted(ids) and len(set(ids)) == 4


async def test_a_message_found_in_a_hidden_version_is_shown_with_the_path_through_it(
    sockets, use_model
):
    """What a search opens (``?message=``): every turn above the message switches to the
    version that leads to it; below it, the version shown there last."""
    from agent_app.durable.branches import reveal

    _, socket = await three_turns(sockets, use_model, "a3 again", "q1b answer")
    await socket.send({"type": "regenerate", "position": 4})
    await socket.run_to_completion()
    await socket.send({"type": "edit", "position": 0, "content": "q1b"})
    await socket.run_to_completion()
    found = await ChatMessage.objects.aget(content="a3")
    assert await sync_to_async(reveal)(socket.session_id, found.pk) == 0
    again = await sockets(socket.session_id)
    assert contents(again.session_frame["history"]) == ["q1", "a1", "q2", "a2", "q3", "a3"]
    assert again.session_frame["history"][0]["versions"] == {"index": 1, "count": 2}
    assert again.session_frame["history"][4]["versions"] == {"index": 1, "count": 2}
    assert await sync_to_async(reveal)(socket.session_id, found.pk) is None  # shown already
    other = await ChatMessage.objects.aget(content="q1b answer")
    assert await sync_to_async(reveal)(socket.session_id, other.pk) == 0
    last = await sockets(socket.session_id)
    assert contents(last.session_frame["history"]) == ["q1b", "q1b answer"]


async def test_in_a_chat_with_no_message_yet_every_branch_frame_is_refused(sockets, use_model):
    use_model(ScriptedModel())
    socket = await sockets()
    for frame in (
        {"type": "switch_version", "position": 0, "index": 1},
        {"type": "edit", "position": 0, "content": "x"},
        {"type": "regenerate", "position": 0},
        {"type": "regenerate"},
    ):
        await socket.send(frame)
        await socket.expect_error("bad_frame")
    await socket.assert_quiet()
    assert not await ChatRun.objects.aexists()
    assert not await ChatMessage.objects.aexists()


async def test_an_edit_whose_process_died_keeps_its_version_and_both_paths(
    sockets, use_model, settings
):
    """An edit is stored before its model is called (the run row, the new version): a
    process that dies then (and whose run may not be continued) leaves an interrupted run,
    the new version shown, the old one whole."""
    from agent_app.durable.runs import begin_run

    settings.ZETT_RUN_ATTEMPTS = 1  # settled, not continued

    _, socket = await three_turns(sockets, use_model)
    await socket.close()
    await sync_to_async(begin_run)(
        socket.session_id,
        "edit-of-a-dead-process",
        content="q2b",
        worker="dead:1:boot",
        kind="edit",
        replace_last_turn=True,
        turn_position=2,
    )
    again = await sockets(socket.session_id)
    await again.assert_quiet()
    run = await ChatRun.objects.aget(request_id="edit-of-a-dead-process")
    assert (run.kind, run.status) == ("edit", "interrupted")
    history = (await sockets(socket.session_id)).session_frame["history"]
    assert contents(history) == ["q1", "a1", "q2b"]
    assert history[2]["versions"] == {"index": 2, "count": 2}
    await again.send({"type": "switch_version", "position": 2, "index": 1})
    back = await again.until(lambda frame: frame["type"] == "branch_switched")
    assert contents(back[-1]["messages"]) == ["q2", "a2", "q3", "a3"]
