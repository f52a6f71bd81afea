"""The ``mcp`` package's own spans in a run's trace: a real stdio MCP server, a real run
with ``TracingExtension``, the spans in an in-memory exporter.

The tool call's request is a child of its ``execute_tool`` span, the connection's first
handshake a child of the run that opened it, and nothing of the connection (its
hours-long listen stream) is a trace of its own outside any run.
"""

from __future__ import annotations

import pytest

from tests.app.telemetry_support import global_exporter, span_ids
from tests.runtime.mcp_support import run_calls, stdio_command, tool_call, tool_results
from zett_agent.extensions.tracing import TracingExtension
from zett_agent.mcp import MCPServer

pytestmark = pytest.mark.slow


@pytest.fixture
def spans():
    yield global_exporter()


async def test_mcp_client_spans_are_children_of_the_run_and_its_tool_span(spans, tmp_path):
    async with MCPServer("notes", command=stdio_command(tmp_path / "log")) as server:
        events, _ = await run_calls(
            {"extensions": [TracingExtension("helper"), server]}, tool_call("notes__add", a=1, b=2)
        )
    assert tool_results(events)[0].content == "3"
    finished = spans.get_finished_spans()
    (run,) = [span for span in finished if span.name == "invoke_agent helper"]
    (tool,) = [span for span in finished if span.name == "execute_tool notes__add"]
    (call,) = [span for span in finished if span.name == "MCP send tools/call add"]
    assert call.parent is not None and call.parent.span_id == span_ids(tool)[1]
    mcp = [span for span in finished if span.name.startswith("MCP send")]
    assert {span.name for span in mcp} >= {"MCP send tools/list", "MCP send tools/call add"}
    # Every span is of the run's trace: no one-span traces of the connection beside it.
    assert {span_ids(span)[0] for span in finished} == {span_ids(run)[0]}
    handshakes = [span for span in mcp if "discover" in span.name or "initialize" in span.name]
    assert handshakes and all(span.parent.span_id == span_ids(run)[1] for span in handshakes)
