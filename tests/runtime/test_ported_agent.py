"""``Agent`` and ``AgentRunContext`` as the upstream library documents them.

The agent keeps its latest request's state as ``agent.state``; ``Agent.create(model)``
binds one default session; it refuses re-binding to another session, blank or invalid
extension names, duplicate tools, metadata and tags that are not plain JSON, a blank
``is_conflict`` id, and an ambiguous publish target; ``context.server_tools`` is keyed by
name; errors read as upstream's.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.runtime.support import ProbeModel, answer, lookup, parked_turn
from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentPhase
from zett_agent.exceptions import AgentProtocolError
from zett_agent.extensions.base import AgentExtension
from zett_agent.extensions.events import ExtensionEvent
from zett_agent.extensions.external import ExternalEvent
from zett_agent.model import ServerToolDefinition

CONFIG = AgentRunConfig(session_id="s")


async def test_agent_state_is_the_latest_request_s_state():
    reached, release = asyncio.Event(), asyncio.Event()
    agent = await Agent.create(ProbeModel(parked_turn(reached, release), answer("again")))
    assert agent.state.messages == () and agent.state.phase is AgentPhase.CREATED
    running = asyncio.create_task(agent.run("first", config=CONFIG))
    await reached.wait()
    assert agent.state.phase is AgentPhase.GENERATING
    assert agent.state is agent.get_state("s")
    with pytest.raises(AgentProtocolError, match="current phase is 'generating'"):
        await agent.run("second", config=CONFIG)
    release.set()
    await running
    assert agent.state.phase is AgentPhase.COMPLETED
    await agent.run("other", config=AgentRunConfig(session_id="t"))
    assert agent.state is agent.get_state("t")


async def test_a_failed_request_leaves_agent_state_failed():
    class Duplicate(AgentExtension):
        async def on_tool(self, context):
            context.register_server_tool(ServerToolDefinition("web_search"))
            context.register_server_tool(ServerToolDefinition("web_search", {"size": "high"}))

    agent = await Agent.create(ProbeModel(answer("unused")), extensions=[Duplicate()])
    with pytest.raises(ValueError, match="Server tool 'web_search' is already registered"):
        await agent.run("hi")
    assert agent.state.phase is AgentPhase.FAILED


async def test_server_tools_are_keyed_by_name_and_copied_per_request():
    definition = ServerToolDefinition("web_search", {"filters": {"domains": ["example.com"]}})
    seen = []

    class Register(AgentExtension):
        async def on_tool(self, context):
            context.register_server_tool(definition)
            context.register_server_tool(ServerToolDefinition("code_execution", {"name": "run"}))

        async def on_state(self, context):
            assert tuple(context.server_tools) == ("web_search", "run")
            seen.append(context.server_tools)
            context.server_tools["web_search"].configuration["filters"]["domains"].append("x")

    model = ProbeModel(answer("one"), answer("two"))
    agent = await Agent.create(model, extensions=[Register()])
    await agent.run("a", config=CONFIG)
    await agent.run("b", config=CONFIG)
    assert seen[0] is not seen[1]
    assert seen[0]["web_search"] is not definition
    assert definition.configuration == {"filters": {"domains": ["example.com"]}}
    assert model.requests[1].server_tools[0].type == "web_search"


async def test_initializing_again_for_another_session_is_refused():
    agent = Agent(ProbeModel(answer("ok")))
    await agent.initialize(CONFIG)
    await agent.initialize(CONFIG)  # the same session: harmless
    await agent.initialize()
    with pytest.raises(AgentProtocolError, match="another session"):
        await agent.initialize(AgentRunConfig(session_id="other"))
    assert agent.config.session_id == "s"


async def test_an_uninitialized_agent_says_it_is_not_initialized():
    agent = Agent(ProbeModel(answer("ok")))
    with pytest.raises(AgentProtocolError, match="not initialized"):
        await agent.run("hi")


def test_tool_names_must_be_unique():
    with pytest.raises(ValueError, match="unique"):
        Agent(ProbeModel(), tools=[lookup, lookup])


@pytest.mark.parametrize("name", ["", "   ", None, 7])
def test_extension_names_must_be_non_empty_strings(name):
    extension = AgentExtension()
    extension.name = name  # checked by the Agent, not at assignment
    with pytest.raises(ValueError, match="non-empty string"):
        Agent(ProbeModel(), extensions=[extension])
    named = type("Named", (AgentExtension,), {"name": name})  # a class attribute
    with pytest.raises(ValueError, match="non-empty string"):
        Agent(ProbeModel(), extensions=[named()])


def test_extension_names_are_unique_including_the_built_ins():
    first, second = AgentExtension(), AgentExtension()
    with pytest.raises(ValueError, match="Duplicate extension name"):
        Agent(ProbeModel(), extensions=[first, second])
    second.name = "second"
    Agent(ProbeModel(), extensions=[first, second])
    first.name = "InternalMessageExtension"
    with pytest.raises(ValueError, match="Duplicate extension name"):
        Agent(ProbeModel(), extensions=[first])


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"metadata": {1: "invalid"}}, "metadata keys"),
        ({"tags": {"": "invalid"}}, "tags keys"),
        ({"tags": {"value": object()}}, "JSON serializable"),
        ({"tags": {"value": (1, 2)}}, "JSON serializable"),
        ({"tags": {"score": float("nan")}}, "JSON serializable"),
        ({"tags": {"deep": {"list": [1, {2: "x"}]}}}, "keys must be strings"),
        ({"tags": ["ok", " "]}, "tags keys"),
    ],
)
async def test_metadata_keys_are_strings_and_tags_plain_json(kwargs, error):
    model = ProbeModel(answer("unused"))
    agent = await Agent.create(model)
    with pytest.raises(ValueError, match=error):
        agent.stream("hi", **kwargs)  # refused at the call
    with pytest.raises(ValueError, match=error):
        await agent.run("hi", **kwargs)
    assert model.requests == []


async def test_tags_are_copied_and_metadata_values_are_handed_over_as_they_are():
    observed = []

    class Watch(AgentExtension):
        async def before_run(self, context):
            observed.append((context.metadata, context.tags))

    live, tags = [object()], {"domain": ["python"]}
    agent = await Agent.create(ProbeModel(answer("ok"), answer("ok")), extensions=[Watch()])
    await agent.run("hi", metadata={"live": live}, tags=tags)
    tags["domain"].append("later")
    await agent.run("hi", tags=["beta"])  # a list of names: each one set
    (first_metadata, first_tags), second = observed
    assert first_metadata["live"] is live  # the caller's own object
    assert first_tags == {"domain": ["python"]}
    assert second == ({}, {"beta": True})


async def test_is_conflict_refuses_a_blank_session_id_and_strips_others():
    reached, release = asyncio.Event(), asyncio.Event()
    agent = await Agent.create(ProbeModel(parked_turn(reached, release)))
    with pytest.raises(ValueError, match="session_id cannot be empty"):
        agent.is_conflict("  ")
    running = asyncio.create_task(agent.run("hi", config=CONFIG))
    await reached.wait()
    assert agent.is_conflict(" s ") and not agent.is_conflict("t")
    release.set()
    await running


async def test_external_events_with_several_sessions_require_a_config():
    reached = {name: asyncio.Event() for name in "ab"}
    release = asyncio.Event()
    model = ProbeModel(parked_turn(reached["a"], release), parked_turn(reached["b"], release))
    agent = await Agent.create(model)
    tasks = []
    for name in "ab":
        tasks.append(asyncio.create_task(agent.run(name, config=AgentRunConfig(session_id=name))))
        await reached[name].wait()
    with pytest.raises(AgentProtocolError, match="require config"):
        agent.emit_external_event(ExternalEvent("unknown", {}))
    release.set()
    await asyncio.gather(*tasks)


class Note(ExtensionEvent):
    __slots__ = ()


class Listener(AgentExtension):
    def __init__(self, name: str) -> None:
        self.name = name
        self.received: list[ExtensionEvent] = []

    async def on_event(self, context, event):
        if isinstance(event, Note):
            self.received.append(event)


async def test_publishing_to_an_ambiguous_target_is_refused():
    first, second = Listener("first"), Listener("second")
    outcomes = []

    class Publisher(AgentExtension):
        async def before_run(self, context):
            await context.publish(Note(), target="second")
            await context.publish(Note(), target=second)
            for target in (Listener, "missing"):
                try:
                    await context.publish(Note(), target=target)
                except ValueError as error:
                    outcomes.append(str(error))

    agent = await Agent.create(ProbeModel(answer("ok")), extensions=[first, second, Publisher()])
    await agent.run("hi")
    assert (len(first.received), len(second.received)) == (0, 2)
    assert "ambiguous" in outcomes[0] and "first, second" in outcomes[0]
    assert "No extension 'missing'" in outcomes[1]


async def test_publishing_to_a_class_with_one_instance_reaches_it():
    only = Listener("only")

    class Publisher(AgentExtension):
        async def before_run(self, context):
            await context.publish(Note(), target=Listener)

    agent = await Agent.create(ProbeModel(answer("ok")), extensions=[only, Publisher()])
    await agent.run("hi")
    assert len(only.received) == 1
