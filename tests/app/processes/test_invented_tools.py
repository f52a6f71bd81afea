"""Names a model makes up do not become span names, against a real daphne process.

The model calls tools that do not exist, each under a name of its own (as 30 anonymous
people could make it do). With ``ZETT_OTEL`` on, their ``execute_tool`` spans are all
``execute_tool other`` and no span carries an invented name; with ``ZETT_OTEL_CONTENT``
the name is recorded (content recording is the operator's choice to keep such text).
"""

from __future__ import annotations

import json
import uuid

import pytest

from tests.app.processes.test_agui_processes import make_token
from tests.app.processes.test_request_refusals import MODEL, start_run
from tests.app.servers import DaphneProcess, fresh_database, migrate, server_env
from tests.app.sse_client import collect
from tests.app.telemetry_support import read_span_file

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.mark.parametrize("content", [False, True])
async def test_spans_of_invented_tools_are_named_other(tmp_path, content):
    spans = tmp_path / "spans.jsonl"
    with fresh_database("sqlite", tmp_path) as url:
        env = server_env(
            url,
            ZETT_MODEL=MODEL,
            ZETT_OTEL="1",
            ZETT_OTEL_CONTENT="1" if content else "0",
            ZETT_TEST_SPAN_FILE=str(spans),
        )
        migrate(env)
        process = DaphneProcess("invented-tools", env, migrate=False).start()
        try:
            secret = make_token(env, "ada")
            names = [f"zz_invented_{index}_{uuid.uuid4().hex[:6]}" for index in range(3)]
            for name in names:
                events = await collect(
                    await start_run(process, secret, str(uuid.uuid4()), f"tool {name}")
                )
                assert events[-1].type == "RUN_FINISHED"
        finally:
            process.stop()

    recorded = read_span_file(spans)
    tools = [span for span in recorded if span["name"].startswith("execute_tool")]
    assert len(tools) == len(names)
    if content:
        assert sorted(span["name"] for span in tools) == sorted(f"execute_tool {n}" for n in names)
        return
    assert {span["name"] for span in tools} == {"execute_tool other"}
    assert {span["attributes"]["gen_ai.tool.name"] for span in tools} == {"other"}
    text = json.dumps(recorded)
    assert not [name for name in names if name in text]
