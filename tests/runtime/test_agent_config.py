"""``AgentRunConfig``, ``Agent`` construction and what a request is given (docs/runtime.md,
Requests)."""

from __future__ import annotations

import dataclasses
import os
import uuid

import pytest

from zett_agent._context import uuid7
from zett_agent.agent import Agent, AgentRunConfig, AgentRunContext
from zett_agent.exceptions import AgentIterationLimitError, AgentProtocolError
from zett_agent.extensions.base import AgentExtension
from zett_agent.extensions.external import ExternalEvent
from zett_agent.extensions.memory import InMemoryMessageAccumulator
from zett_agent.messages import AssistantMessage, SystemMessage, UserMessage

from .support import HookLog, ProbeModel, answer, call, calls, collect, lookup


class ContextRecorder(AgentExtension):
    """Keeps the context of every request it sees."""

    def __init__(self) -> None:
        self.contexts: list[AgentRunContext] = []

    async def on_tool(self, context):
        self.contexts.append(context)


def is_uuid7(value: str) -> bool:
    return uuid.UUID(value).version == 7


def test_a_config_defaults_to_no_ids():
    config = AgentRunConfig()
    assert (config.session_id, config.request_id, config.parent_session_id) == (None, None, None)


def test_a_config_is_frozen():
    config = AgentRunConfig(session_id="s")
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.session_id = "other"  # type: ignore[misc]


@pytest.mark.parametrize("blank", ["", "   "])
def test_blank_ids_normalise_to_none(blank):
    config = AgentRunConfig(session_id=blank, request_id=blank, parent_session_id=blank)
    assert (config.session_id, config.request_id, config.parent_session_id) == (None, None, None)


def test_a_config_keeps_the_ids_it_is_given():
    config = AgentRunConfig(session_id="s", request_id="r", parent_session_id="p")
    assert (config.session_id, config.request_id, config.parent_session_id) == ("s", "r", "p")


@pytest.mark.parametrize(
    ("initialized", "config", "session_id", "request_id"),
    [
        pytest.param(
            "session-init",
            None,
            "session-init",
            None,
            id="without a config it runs in the initialized session",
        ),
        pytest.param(
            "session-init",
            AgentRunConfig(request_id="request-9"),
            "session-init",
            "request-9",
            id="a config without a session id runs in the initialized session",
        ),
        pytest.param(
            None,
            AgentRunConfig(session_id="s-1"),
            "s-1",
            None,
            id="a config without a request id gets a fresh uuid7",
        ),
        pytest.param(
            None,
            AgentRunConfig(session_id="s-1", request_id="r-1"),
            "s-1",
            "r-1",
            id="it keeps the ids of its config",
        ),
    ],
)
async def test_a_request_runs_in_the_session_and_request_its_config_names(
    initialized, config, session_id, request_id
):
    recorder = ContextRecorder()
    agent = await Agent.create(
        ProbeModel(answer("hi")),
        config=AgentRunConfig(session_id=initialized) if initialized else None,
        extensions=[recorder],
    )
    events = await collect(agent, "hello", config=config)
    (context,) = recorder.contexts
    assert (context.session_id, context.config.session_id) == (session_id, session_id)
    if request_id is None:
        assert is_uuid7(context.request_id)
    else:
        assert context.request_id == request_id
    assert context.config.request_id == context.request_id
    assert {event.session_id for event in events} == {session_id}


async def test_an_agent_created_without_a_config_keeps_one_default_uuid7_session():
    recorder = ContextRecorder()
    agent = await Agent.create(
        ProbeModel(answer("hi"), answer("again")),
        extensions=[recorder, InMemoryMessageAccumulator()],
    )
    assert is_uuid7(agent.config.session_id)
    await agent.run("hello")
    await agent.run("hello")
    first, second = recorder.contexts
    assert first.session_id == second.session_id == agent.config.session_id
    assert is_uuid7(first.request_id)
    assert first.request_id != second.request_id
    # the default session keeps its history: the second request saw the first
    assert [m.content for m in agent.state.messages[1:]] == ["hello", "hi", "hello", "again"]


async def test_an_agent_that_was_never_initialized_refuses_requests():
    agent = Agent(ProbeModel(answer("hi")), extensions=[])
    with pytest.raises(AgentProtocolError):
        await agent.run("hello")


@pytest.mark.parametrize(
    "use",
    [
        lambda agent: agent.stream("hello"),
        lambda agent: agent.resume_stream(),
        lambda agent: agent.compact_stream(),
        lambda agent: agent.emit_external_event(ExternalEvent("steering_message", {"text": "x"})),
    ],
    ids=["stream", "resume_stream", "compact_stream", "emit_external_event"],
)
def test_an_agent_that_was_never_initialized_refuses_at_the_call_itself(use):
    log = HookLog()
    agent = Agent(ProbeModel(answer("hi")), extensions=[log])
    with pytest.raises(AgentProtocolError, match="not initialized"):
        use(agent)  # not iterated: the refusal does not wait for the first event
    assert log.log == []
    assert agent.pending is False


async def test_run_returns_the_final_assistant_message():
    agent = await Agent.create(ProbeModel(answer("Hello there")), extensions=[])
    result = await agent.run("hi")
    assert isinstance(result, AssistantMessage)
    assert result.content == "Hello there"


async def test_stream_accepts_a_user_message_as_input():
    model = ProbeModel(answer("ok"))
    agent = await Agent.create(model, extensions=[])
    await agent.run(UserMessage(content="from an object"))
    assert model.requests[0].messages[-1] == UserMessage(content="from an object")


async def test_the_default_system_prompt_opens_every_model_request():
    model = ProbeModel(answer("ok"))
    agent = await Agent.create(model, extensions=[])
    await agent.run("hi")
    first = model.requests[0].messages[0]
    assert isinstance(first, SystemMessage)
    assert first.content == "You are a helpful assistant."


async def test_a_custom_system_prompt_replaces_the_default():
    model = ProbeModel(answer("ok"))
    agent = await Agent.create(model, system_prompt="Answer in French.", extensions=[])
    await agent.run("hi")
    system = [m for m in model.requests[0].messages if isinstance(m, SystemMessage)]
    assert [m.content for m in system] == ["Answer in French."]


async def test_agent_tools_are_offered_to_the_model_by_definition():
    model = ProbeModel(answer("ok"))
    agent = await Agent.create(model, tools=[lookup], extensions=[])
    await agent.run("hi")
    assert model.requests[0].tools == (lookup.definition,)


async def test_stream_uses_a_per_request_model_when_given_one():
    default_model, other_model = ProbeModel(), ProbeModel(answer("from the other model"))
    agent = await Agent.create(default_model, extensions=[])
    result = await agent.run("hi", model=other_model)
    assert result.content == "from the other model"
    assert default_model.requests == []


async def test_metadata_and_tags_reach_the_context():
    recorder = ContextRecorder()
    agent = await Agent.create(ProbeModel(answer("ok")), extensions=[recorder])
    await agent.run("hi", metadata={"user": "ada"}, tags=["beta"])
    (context,) = recorder.contexts
    assert context.metadata["user"] == "ada"
    assert "beta" in context.tags


async def test_the_context_exposes_its_input_model_and_extensions():
    recorder = ContextRecorder()
    model = ProbeModel(answer("ok"))
    agent = await Agent.create(model, extensions=[recorder])
    await agent.run("hi")
    (context,) = recorder.contexts
    assert context.input_message == UserMessage(content="hi")
    assert context.model is model
    names = [extension.name for extension in context.extensions]
    assert names[0] == "ContextRecorder"
    assert {"InternalMessageExtension", "SteeringExtension"} <= set(names)


async def test_the_default_extensions_remember_history_and_explain_tools():
    model = ProbeModel(answer("first answer"), answer("second answer"))
    agent = await Agent.create(model, tools=[lookup], config=AgentRunConfig(session_id="s"))
    await agent.run("first question")
    await agent.run("second question")
    second = model.requests[1].messages
    assert UserMessage(content="first question") in second
    assert any(getattr(m, "content", None) == "first answer" for m in second)
    guidance = [m for m in second if isinstance(m, SystemMessage) and "lookup" in m.content]
    assert len(guidance) == 1


async def test_an_explicit_empty_extension_list_replaces_the_defaults():
    model = ProbeModel(answer("first answer"), answer("second answer"))
    agent = await Agent.create(
        model, tools=[lookup], config=AgentRunConfig(session_id="s"), extensions=[]
    )
    await agent.run("first question")
    await agent.run("second question")
    second = model.requests[1].messages
    assert UserMessage(content="first question") not in second
    assert [type(m) for m in second] == [SystemMessage, UserMessage]


def test_extension_names_must_be_unique():
    with pytest.raises(ValueError, match="ContextRecorder"):
        Agent(ProbeModel(), extensions=[ContextRecorder(), ContextRecorder()])


async def test_two_instances_of_one_extension_register_under_different_names():
    first, second = ContextRecorder(), ContextRecorder()
    second.name = "SecondRecorder"
    agent = await Agent.create(ProbeModel(answer("ok")), extensions=[first, second])
    await agent.run("hi")
    assert len(first.contexts) == len(second.contexts) == 1


async def test_extensions_run_in_priority_order_with_ties_in_registration_order():
    order: list[str] = []

    class Named(AgentExtension):
        def __init__(self, name: str, priority: int) -> None:
            self.name = name
            self.priority = priority

        async def before_run(self, context):
            order.append(self.name)

    agent = await Agent.create(
        ProbeModel(answer("ok")),
        extensions=[
            Named("late", 200),
            Named("tie-a", 100),
            Named("early", 10),
            Named("tie-b", 100),
        ],
    )
    await agent.run("hi")
    assert order == ["early", "tie-a", "tie-b", "late"]


async def test_the_iteration_limit_defaults_to_thirty_six():
    model = ProbeModel(*[calls(call("lookup", f"c{i}", key="k")) for i in range(36)])
    agent = await Agent.create(model, tools=[lookup], extensions=[])
    with pytest.raises(AgentIterationLimitError, match="36"):
        await agent.run("loop forever")
    assert len(model.requests) == 36


@pytest.mark.parametrize("message", [42, None, ["hello"]], ids=["int", "none", "list"])
async def test_an_input_that_is_not_text_or_a_user_message_is_a_type_error(message):
    model = ProbeModel(answer("hi"))
    agent = await Agent.create(model, extensions=[])
    with pytest.raises(TypeError, match="UserMessage"):
        await agent.run(message)
    assert model.requests == []


def test_ids_in_a_row_are_distinct_uuid7s():
    ids = [uuid7() for _ in range(3 * 256)]  # several blocks of random digits
    assert len(set(ids)) == len(ids)
    assert all(is_uuid7(value) for value in ids)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_draws_random_digits_of_its_own():
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next id, then leave at once
        os.write(write_end, uuid7().encode())
        os._exit(0)
    os.close(write_end)
    os.waitpid(pid, 0)
    child = os.read(read_end, 64).decode()
    os.close(read_end)
    parent = uuid7()
    # Without a block of its own the child would hand out the parent's next digits.
    assert is_uuid7(child)
    assert child[15:] != parent[15:]
