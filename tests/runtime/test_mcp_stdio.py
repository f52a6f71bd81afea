"""MCP over stdio: a real ``mcp`` server as a child process, driven by real Agent runs.

Listing and naming, argument checks before the call (the server's own log proves nothing
reached it), result mapping, list_changed refresh, filters and approval flags.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal

import pytest

from zett_agent.mcp import CUT_MARKER, MCPServer
from zett_agent.messages import AssistantMessage, ImageContent, TextContent, ToolCall

from .mcp_support import (
    T,
    calls_in,
    listings_in,
    run_calls,
    stdio_command,
    tool_call,
    tool_results,
)

pytestmark = pytest.mark.slow


@pytest.fixture
def log(tmp_path):
    return tmp_path / "calls.jsonl"


@pytest.fixture
async def server(log):
    async with MCPServer("notes", command=stdio_command(log)) as server:
        yield server


async def test_tools_are_named_after_the_server_and_carry_the_servers_schema(server):
    tools = {tool.name: tool for tool in await server.tools()}
    assert {"notes__add", "notes__write_note", "notes__delete_all"} <= set(tools)
    add = tools["notes__add"]
    assert add.description == "Add two integers."
    assert add.parameters["properties"]["a"]["type"] == "integer"
    assert add.parameters["required"] == ["a", "b"]


async def test_an_extension_offers_the_tools_to_the_model_and_a_call_reaches_the_server(
    server, log
):
    events, model = await run_calls({"extensions": [server]}, tool_call("notes__add", a=2, b=40))
    offered = {definition.name for definition in model.requests[0].tools}
    assert "notes__add" in offered
    (result,) = tool_results(events)
    assert result.success is True
    assert result.content == "42"
    assert result.attributes["mcp_structured_content"] == {"result": 42}
    assert calls_in(log) == [{"tool": "add", "arguments": {"a": 2, "b": 40}, "token": "stdio"}]


async def test_handed_out_tools_work_without_the_extension(server, log):
    events, _ = await run_calls(
        {"tools": await server.tools(), "extensions": []}, tool_call("notes__add", a=1, b=1)
    )
    assert tool_results(events)[0].content == "2"


async def test_a_server_both_handed_out_and_an_extension_offers_each_tool_once(server):
    events, model = await run_calls(
        {"tools": await server.tools(), "extensions": [server]}, tool_call("notes__add", a=1, b=1)
    )
    names = [definition.name for definition in model.requests[0].tools]
    assert names.count("notes__add") == 1
    assert tool_results(events)[0].content == "2"


@pytest.mark.parametrize(
    "arguments",
    [{"a": "two", "b": 1}, {"a": 1}, {"a": 1, "b": None}],
    ids=["wrong-type", "missing", "null"],
)
async def test_invalid_arguments_are_refused_before_anything_reaches_the_server(
    server, log, arguments
):
    events, _ = await run_calls({"extensions": [server]}, tool_call("notes__add", **arguments))
    (result,) = tool_results(events)
    assert result.success is False
    assert "Invalid arguments for tool 'notes__add'" in result.content
    assert calls_in(log) == []


async def test_an_approval_gate_sees_invalid_arguments_refused_without_the_server(server, log):
    add = {tool.name: tool for tool in await server.tools()}["notes__add"]
    assert add.validate_arguments({"a": 1, "b": 2}) == {"a": 1, "b": 2}
    with pytest.raises(ValueError, match="'b' is a required property"):
        add.validate_arguments({"a": 1})
    with pytest.raises(ValueError, match="JSON object"):
        add.validate_arguments(["a"])
    assert calls_in(log) == []


async def test_images_become_image_parts_and_text_stays_text(server):
    events, _ = await run_calls({"extensions": [server]}, tool_call("notes__picture"))
    (result,) = tool_results(events)
    text, image = result.content
    assert text == TextContent("a tiny picture")
    assert isinstance(image, ImageContent)
    assert image.source.media_type == "image/png"
    assert image.source.data == b"\x89PNG\r\n\x1a\nzett"


async def test_structured_content_reaches_the_model_as_json(server):
    events, _ = await run_calls({"extensions": [server]}, tool_call("notes__forecast", city="Oslo"))
    (result,) = tool_results(events)
    assert json.loads(result.content) == {"city": "Oslo", "celsius": 21}


async def test_an_is_error_result_is_a_failed_tool_result(server):
    events, _ = await run_calls({"extensions": [server]}, tool_call("notes__fail"))
    (result,) = tool_results(events)
    assert result.success is False
    assert "fail" in result.content
    assert events[-1].type.value == "run_completed"


async def test_a_long_result_is_cut_with_a_marker(log):
    async with MCPServer("notes", command=stdio_command(log), max_result_chars=1000) as server:
        events, _ = await run_calls({"extensions": [server]}, tool_call("notes__big", size=5000))
    (result,) = tool_results(events)
    assert result.content.startswith("x" * 1000 + "\n" + CUT_MARKER)
    assert "5000 characters, the first 1000 are shown" in result.content
    assert len(result.content) < 1100


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_list_is_cached_and_refreshed_after_the_server_announces_a_change(log, mode):
    async with MCPServer("notes", command=stdio_command(log), mode=mode) as server:
        before = {tool.name for tool in await server.tools()}
        assert "notes__fresh" not in before
        assert listings_in(log) == 1
        assert {tool.name for tool in await server.tools()} == before
        await run_calls({"extensions": [server]}, tool_call("notes__grow"))
        assert listings_in(log) == 1  # every request so far was served from the cache
        events, model = await run_calls(
            {"extensions": [server]}, tool_call("notes__fresh"), session="s2"
        )
        assert listings_in(log) == 2
    assert "notes__fresh" in {definition.name for definition in model.requests[0].tools}
    assert tool_results(events)[0].content == "fresh!"


async def test_include_and_exclude_accept_own_and_prefixed_names(log):
    async with MCPServer(
        "notes",
        command=stdio_command(log),
        include=["add", "notes__picture", "fail"],
        exclude=["notes__fail"],
    ) as server:
        assert {tool.name for tool in await server.tools()} == {"notes__add", "notes__picture"}


async def test_approval_follows_the_annotations_and_no_approval(log):
    async with MCPServer(
        "notes", command=stdio_command(log), no_approval=["notes__grow", "delete_all"]
    ) as server:
        await server.tools()
        assert server.needs_approval("notes__add") is False  # readOnlyHint: true
        assert server.needs_approval("add") is False
        assert server.needs_approval("notes__write_note") is True  # no annotations
        assert server.needs_approval("notes__odd_hints") is True  # destructiveHint: true
        assert server.needs_approval("notes__grow") is False  # exempt by prefixed name
        assert server.needs_approval("notes__delete_all") is False  # exempt by own name
        assert server.needs_approval("notes__unknown") is True
        info = server.tool_info("write_note")
        assert info.zett_name == "notes__write_note"
        assert info.needs_approval is True
        assert server.tool_info("notes__add").annotations == {"readOnlyHint": True}
        names = server.approval_names  # the live set an approval gate keeps
        assert "notes__write_note" in names and "notes__odd_hints" in names
        assert "notes__add" not in names and "notes__grow" not in names
        assert "write_note" not in names and "other__write_note" not in names
        assert set(names) == {
            name for name in (t.name for t in await server.tools()) if server.needs_approval(name)
        }


async def test_closing_the_server_closes_its_connection_and_ends_its_task(log):
    server = MCPServer("notes", command=stdio_command(log))
    await server.tools()
    assert server.connection_count == 1
    await server.aclose()
    assert server.connection_count == 0


def env_call(call_id: str, variable: str) -> AssistantMessage:
    return AssistantMessage(
        tool_calls=(ToolCall(id=call_id, name="notes__env_var", arguments={"name": variable}),)
    )


async def test_the_child_gets_only_the_environment_it_is_given(log, monkeypatch):
    monkeypatch.setenv("ZETT_WORKER_SECRET", "do-not-leak")
    async with MCPServer(
        "notes", command=stdio_command(log), env={"ZETT_GIVEN": "given"}
    ) as server:
        events, _ = await run_calls(
            {"extensions": [server]},
            env_call("e1", "ZETT_WORKER_SECRET"),
            env_call("e2", "ZETT_GIVEN"),
        )
    secret, given = tool_results(events)
    assert secret.content == ""
    assert given.content == "given"


async def test_a_child_that_dies_mid_call_fails_that_call_and_the_next_one_gets_a_new_child(log):
    async with MCPServer("notes", command=stdio_command(log), backoff=0.05) as server:
        events, _ = await run_calls(
            {"extensions": [server]},
            tool_call("notes__crash", "c1"),
            tool_call("notes__add", "c2", a=1, b=2),
        )
    crashed, added = tool_results(events)
    assert crashed.success is False
    assert "may or may not have run" in crashed.content
    assert added.content == "3"
    assert [entry["tool"] for entry in calls_in(log)] == ["crash", "add"]


class _Lost(logging.Handler):
    """Sets ``seen`` when the connection logs that it lost its session."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if "connection lost" in record.getMessage():
            self.seen.set()


async def test_a_child_killed_between_calls_is_noticed_at_once_and_the_next_call_waits(log):
    lost = _Lost()
    logger = logging.getLogger("zett_agent.mcp")
    logger.addHandler(lost)
    previous = logger.level
    logger.setLevel(logging.INFO)
    try:
        async with MCPServer("notes", command=stdio_command(log), backoff=0.05) as server:
            first, _ = await run_calls({"extensions": [server]}, tool_call("notes__pid"))
            pid = int(tool_results(first)[0].content)
            os.kill(pid, signal.SIGKILL)
            # Noticed without any call: the connection reconnects on its own.
            await asyncio.wait_for(lost.seen.wait(), timeout=5)
            again, _ = await run_calls({"extensions": [server]}, tool_call("notes__pid"))
            (result,) = tool_results(again)
            assert result.success is True, result.content
            assert int(result.content) != pid
    finally:
        logger.removeHandler(lost)
        logger.setLevel(previous)
    assert [entry["tool"] for entry in calls_in(log)] == ["pid", "pid"]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_progress_and_log_lines_of_a_call_become_tool_progress_events(log, mode):
    async with MCPServer("notes", command=stdio_command(log), mode=mode) as server:
        events, _ = await run_calls({"extensions": [server]}, tool_call("notes__count_to", n=3))
    updates = [e.payload for e in events if e.type is T.CUSTOM and e.name == "tool_progress"]
    assert updates, [e.type for e in events]
    assert {(u["tool_call_id"], u["tool"], u["server"]) for u in updates} == {
        ("c1", "notes__count_to", "notes")
    }
    # The last state is always shown: 3 of 3, and the server's last log line.
    assert (updates[-1]["progress"], updates[-1]["total"]) == (3, 3)
    assert (updates[-1]["message"], updates[-1]["level"]) == ("counted 3", "info")
    # Each update comes before the call's end.
    ended = next(i for i, e in enumerate(events) if e.type is T.TOOL_COMPLETED)
    assert all(
        i < ended for i, e in enumerate(events) if e.type is T.CUSTOM and e.name == "tool_progress"
    )
    assert tool_results(events)[0].content == "counted to 3"
