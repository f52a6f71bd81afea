"""Configured MCP servers (``ZETT_MCP_SERVERS``): the ``mcpServers`` shape, ``${VAR}``, the
executable allow-list, ``manage.py check`` (no connection) and ``manage.py zett_mcp list``
(connects to a real stdio server), and closing every connection at a worker's drain."""

from __future__ import annotations

import io
import json
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import CommandError

from agent_app.agents import mcp
from agent_app.checks import check_mcp_servers
from agent_app.process import shutdown
from tests.runtime.mcp_support import SERVER

ENV = {"DOCS_TOKEN": "s3cret", "DOCS_HOST": "mcp.example.com"}


def test_the_mcpservers_shape_builds_http_and_stdio_servers_with_variables_expanded():
    config = {
        "mcpServers": {
            "docs": {
                "type": "http",
                "url": "https://${DOCS_HOST}/mcp",
                "headers": {"Authorization": "Bearer ${DOCS_TOKEN}"},
            },
            "files": {
                "command": "npx",
                "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv"],
                "env": {"TOKEN": "${DOCS_TOKEN}"},
                "exclude": ["write_file"],
            },
        }
    }
    docs, files = mcp.parse_servers(config, environ=ENV)
    assert docs.url == "https://mcp.example.com/mcp"
    assert docs.configured_headers == {"Authorization": "Bearer s3cret"}
    assert files.command == ["npx", "-y", "@modelcontextprotocol/server-filesystem", "/srv"]
    assert files._env == {"TOKEN": "s3cret"}  # the child's environment: only what is given
    assert mcp.parse_servers(json.dumps(config), environ=ENV)[0].url == docs.url  # JSON text


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"a": {"url": "https://x/${NOPE}"}}, "server 'a': the environment variable NOPE"),
        ({"a": {"command": "bash", "args": ["-c", "id"]}}, "'bash' .*is not in the allowed"),
        ({"a": {"command": "/tmp/evil"}}, "'/tmp/evil' .*is not in the allowed"),
        ({"a": {}}, "server 'a' needs a url"),
        ({"a": {"url": "https://x", "env": {}}}, "an HTTP server takes url"),
        ({"a": {"url": "ftp://x"}}, "url must be http"),
        ({"a": {"command": "npx", "args": "-y"}}, "args must be a list of strings"),
        ({"a__b": {"url": "https://x"}}, "server name"),
        ("{not json", "not valid JSON"),
        ([1], "must be"),
    ],
)
def test_a_bad_configuration_names_the_server_and_the_problem(config, message):
    with pytest.raises(ImproperlyConfigured, match=message):
        mcp.parse_servers(config, environ=ENV)


def test_an_allowed_absolute_path_may_run():
    (server,) = mcp.parse_servers(
        {"local": {"command": sys.executable, "args": [str(SERVER), "stdio", "/dev/null"]}},
        allowed_commands=[sys.executable],
        environ={},
    )
    assert server.command[0] == sys.executable


def test_manage_py_check_reports_a_bad_setting_without_connecting(settings):
    settings.ZETT_MCP_SERVERS = {"mcpServers": {"shell": {"command": "sh"}}}
    (error,) = check_mcp_servers()
    assert error.id == "zett.E051"
    assert "'sh'" in error.msg
    settings.ZETT_MCP_SERVERS = {"mcpServers": {"docs": {"url": "https://192.0.2.1/mcp"}}}
    assert check_mcp_servers() == []  # parsed only: nothing listens there
    settings.ZETT_MCP_ALLOWED_COMMANDS = "npx"
    assert check_mcp_servers()[0].id == "zett.E050"


def test_zett_mcp_list_connects_and_lists_the_tools(settings, tmp_path):
    settings.ZETT_MCP_ALLOWED_COMMANDS = [sys.executable]
    settings.ZETT_MCP_SERVERS = {
        "mcpServers": {
            "local": {
                "command": sys.executable,
                "args": [str(SERVER), "stdio", str(tmp_path / "log")],
            }
        }
    }
    out = io.StringIO()
    call_command("zett_mcp", "list", stdout=out)
    text = out.getvalue()
    assert "local (ZETT_MCP_SERVERS)" in text
    assert "local__add  [read-only]" in text
    assert "local__write_note  [needs approval]" in text


def test_zett_mcp_list_says_why_a_server_failed_and_exits_1(settings):
    settings.ZETT_MCP_SERVERS = {
        "mcpServers": {"gone": {"url": "http://127.0.0.1:9/mcp", "include": ["x"]}}
    }
    out = io.StringIO()
    with pytest.raises(CommandError, match="1 of 1 MCP server"):
        call_command("zett_mcp", "list", "--timeout", "1", stdout=out)
    assert "gone (ZETT_MCP_SERVERS)" in out.getvalue()
    assert "error:" in out.getvalue()


async def test_a_drain_closes_every_mcp_connection(settings, tmp_path):
    from zett_agent.mcp import MCPServer

    server = mcp._bind(
        MCPServer("drained", command=[sys.executable, str(SERVER), "stdio", "/dev/null"])
    )
    await server.tools()
    assert server.connection_count == 1
    assert mcp.close_all in shutdown._closers  # registered when agent_app.agents.mcp loads
    await mcp.close_all()
    assert server.connection_count == 0
