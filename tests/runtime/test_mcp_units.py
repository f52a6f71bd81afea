"""zett_agent.mcp without a server: configuration checks, the allow-list, result mapping."""

from __future__ import annotations

import asyncio
import base64
import os
import socket
import sys

import mcp_types as types
import pytest

from zett_agent.mcp import (
    CUT_MARKER,
    MCPConnectionError,
    MCPServer,
    MCPToolArgumentsError,
    check_stdio_command,
)
from zett_agent.mcp.results import ArgumentValidator, to_tool_result
from zett_agent.messages import ImageContent, TextContent


def mapped(*content, structured=None, is_error=False, max_chars=1000, max_image_bytes=100):
    result = types.CallToolResult(
        content=list(content), structured_content=structured, is_error=is_error
    )
    return to_tool_result(result, max_chars=max_chars, max_image_bytes=max_image_bytes)


def text(value: str) -> types.TextContent:
    return types.TextContent(type="text", text=value)


def image(data: str, mime: str = "image/png") -> types.ImageContent:
    return types.ImageContent(type="image", data=data, mime_type=mime)


def test_text_parts_are_joined_into_one_text_result():
    result = mapped(text("one"), text("two"))
    assert result.content == "one\ntwo"
    assert result.success is True


def test_is_error_fails_the_result_and_an_empty_error_still_says_so():
    assert mapped(text("bad input"), is_error=True).success is False
    assert "error" in mapped(is_error=True).content


def test_other_content_is_described_not_passed_through():
    audio = types.AudioContent(type="audio", data="AAAA", mime_type="audio/wav")
    link = types.ResourceLink(type="resource_link", uri="file:///a.txt", name="a")
    embedded_text = types.EmbeddedResource(
        type="resource",
        resource=types.TextResourceContents(uri="file:///b.txt", text="inside b"),
    )
    embedded_blob = types.EmbeddedResource(
        type="resource",
        resource=types.BlobResourceContents(uri="file:///c.bin", blob="AAAA"),
    )
    content = mapped(audio, link, embedded_text, embedded_blob).content
    assert "[audio (audio/wav) omitted]" in content
    assert "[resource link: file:///a.txt (a)]" in content
    assert "inside b" in content
    assert "[binary resource file:///c.bin" in content


def test_images_too_large_or_not_base64_become_a_note():
    small = base64.b64encode(b"png!").decode()
    big = base64.b64encode(b"x" * 101).decode()
    parts = mapped(image(small), image(big), image("%%%")).content
    assert isinstance(parts[0], ImageContent) and parts[0].source.data == b"png!"
    assert parts[1] == TextContent("[image omitted: 101 bytes, more than the 100 allowed]")
    assert "not valid base64" in parts[2].text


def test_the_cap_cuts_text_across_parts_and_says_how_much():
    content = mapped(text("a" * 600), text("b" * 600)).content
    assert content.startswith("a" * 600 + "\n" + "b" * 400 + "\n" + CUT_MARKER)
    assert "1200 characters, the first 1000 are shown" in content


def test_large_structured_content_is_not_copied_into_the_attributes():
    assert mapped(text("{}"), structured={"k": "v"}).attributes == {
        "mcp_structured_content": {"k": "v"}
    }
    assert mapped(text("{}"), structured={"k": "v" * 2000}).attributes == {}


def test_arguments_are_checked_against_the_schema_with_every_problem_named():
    validator = ArgumentValidator(
        "s__t",
        {
            "type": "object",
            "properties": {"n": {"type": "integer", "minimum": 1}},
            "required": ["n"],
            "additionalProperties": False,
        },
    )
    validator.check({"n": 3})
    with pytest.raises(MCPToolArgumentsError, match="n: 0 is less than the minimum of 1"):
        validator.check({"n": 0})
    with pytest.raises(MCPToolArgumentsError, match="'n' is a required property"):
        validator.check({})
    with pytest.raises(MCPToolArgumentsError, match="Additional properties"):
        validator.check({"n": 2, "extra": 1})


def test_an_invalid_server_schema_fails_the_call_clearly():
    with pytest.raises(MCPToolArgumentsError, match="invalid input schema"):
        ArgumentValidator("s__t", {"type": "no-such-type"}).check({})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "exactly one of url= or command="),
        ({"url": "http://x/mcp", "command": ["x"]}, "exactly one"),
        ({"url": "ftp://x"}, "http"),
        ({"command": "npx server"}, "list of strings"),
        ({"command": ["npx"], "headers": {"a": "b"}}, "headers= is for HTTP"),
        ({"url": "http://x/mcp", "env": {}}, "for stdio servers"),
        ({"url": "http://x/mcp", "connect_timeout": 0}, "connect_timeout"),
        ({"url": "http://x/mcp", "max_result_chars": 0}, "max_result_chars"),
        ({"url": "http://x/mcp", "mode": "2025-11-25"}, "mode must be"),
    ],
)
def test_bad_configuration_is_refused_at_construction(kwargs, message):
    with pytest.raises(ValueError, match=message):
        MCPServer("docs", **kwargs)


@pytest.mark.parametrize("name", ["", "two__parts", "has space", "x" * 41])
def test_bad_server_names_are_refused(name):
    with pytest.raises(ValueError, match="server name"):
        MCPServer(name, url="http://x/mcp")


def test_before_listing_every_tool_needs_approval_unless_exempt():
    server = MCPServer("docs", url="http://x/mcp", no_approval=["search", "docs__read"])
    assert server.needs_approval("docs__write") is True
    assert server.needs_approval("docs__search") is False
    assert server.needs_approval("read") is False
    assert server.tool_info("docs__write") is None


def test_the_allow_list_accepts_names_and_absolute_paths_only():
    assert check_stdio_command(["npx", "-y", "pkg"]) == ["npx", "-y", "pkg"]
    assert check_stdio_command([sys.executable, "-m", "x"], allowed=[sys.executable])
    with pytest.raises(ValueError, match="not in the allowed list"):
        check_stdio_command(["bash", "-c", "rm -rf /"])
    with pytest.raises(ValueError, match="not in the allowed list"):
        check_stdio_command(["./npx"])  # a relative path is not the allowed name
    with pytest.raises(ValueError, match="not in the allowed list"):
        check_stdio_command([os.path.join("/tmp", "npx")])
    with pytest.raises(ValueError, match="non-empty list"):
        check_stdio_command("npx pkg")
    with pytest.raises(ValueError, match="non-empty list"):
        check_stdio_command([])


def test_zett_names_are_safe_short_and_distinct():
    server = MCPServer("docs", url="http://x/mcp")
    assert server._zett_name("search") == "docs__search"
    assert server._zett_name("pages.get") == "docs__pages_get"
    dotted = server._zett_name("a.b", taken={"docs__a_b"})
    assert dotted.startswith("docs__a_b_") and dotted != "docs__a_b"
    long = server._zett_name("x" * 100)
    assert len(long) <= 64 and long != server._zett_name("x" * 99)


async def test_the_connection_key_follows_headers_and_person_and_hides_both():
    async def async_headers(context):
        return {"Authorization": f"Bearer {context}"}

    server = MCPServer("docs", url="http://x/mcp", headers=async_headers)
    alice, headers = await server._key_for("alice")
    assert headers == {"Authorization": "Bearer alice"}
    assert alice == (await server._key_for("alice"))[0]
    assert alice != (await server._key_for("bob"))[0]
    assert "alice" not in alice  # a digest: no credential in the key

    by_person = MCPServer("docs", url="http://x/mcp", headers={"A": "b"}, person_key=str)
    assert (await by_person._key_for("ann"))[0] != (await by_person._key_for("ben"))[0]

    with pytest.raises(TypeError, match="headers must map str to str"):
        await MCPServer("docs", url="http://x/mcp", headers=lambda c: {"A": 1})._key_for(None)


@pytest.mark.slow
def test_zett_agent_mcp_imports_no_django():
    import subprocess

    probe = "import sys, zett_agent.mcp; print('django' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "False"


async def test_shutdown_ends_a_connection_attempt_that_hangs_and_its_waiting_caller():
    loop = asyncio.get_running_loop()
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.setblocking(False)
        port = listener.getsockname()[1]
        server = MCPServer("mute", url=f"http://127.0.0.1:{port}/mcp")
        listing = asyncio.create_task(server.tools())
        accepted, _ = await loop.sock_accept(listener)  # the client is connecting now
        with accepted:  # ...and this server never answers
            await server.aclose()
            with pytest.raises(MCPConnectionError, match="'mute'"):
                await listing
    assert server.connection_count == 0
