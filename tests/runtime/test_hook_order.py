"""The order of extension hooks in one request (docs/runtime.md, Hooks; the confirmation
example)."""

from __future__ import annotations

import dataclasses

import pytest

from zett_agent._held import is_held_tool
from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.exceptions import AgentProtocolError
from zett_agent.extensions.base import AgentExtension
from zett_agent.extensions.events import MessageAppendedEvent
from zett_agent.messages import (
    AssistantMessage,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from zett_agent.model import ModelResponse
from zett_agent.tools.base import ToolResult

from .support import HookLog, ProbeModel, SeededHistory, answer, call, calls, lookup

SETUP = [
    ("phase", "created", "loading_context"),
    "on_tool",
    "on_state",
    "on_message",
    ("phase", "loading_context", "ready"),
    ("appended", "user"),
    "before_run",
]
MODEL_CALL = [
    "before_turn",
    "before_model",
    ("phase", "ready", "generating"),
    ("phase", "generating", "ready"),
    ("appended", "assistant"),
    "after_model",
]
TOOL_CALL = [
    "before_tool",
    ("phase", "ready", "running_tool"),
    "on_tool_call",
    ("phase", "running_tool", "ready"),
    "after_tool",
    ("appended", "tool"),
]
SUCCESS = ["after_run", "on_success", ("phase", "ready", "completed")]


async def test_one_tool_call_then_an_answer_runs_every_hook_in_the_documented_order():
    log = HookLog()
    model = ProbeModel(calls(call("lookup", key="k")), answer("done"))
    agent = await Agent.create(model, tools=[lookup], extensions=[log])
    await agent.run("hi")
    assert log.log == [
        *SETUP,
        *MODEL_CALL,  # the model asks for a tool
        *TOOL_CALL,
        "after_turn",
        *MODEL_CALL,  # the final answer
        "after_turn",
        *SUCCESS,
    ]


async def test_a_direct_answer_skips_the_tool_hooks():
    log = HookLog()
    agent = await Agent.create(ProbeModel(answer("done")), extensions=[log])
    await agent.run("hi")
    assert log.log == [*SETUP, *MODEL_CALL, "after_turn", *SUCCESS]


async def test_each_setup_stage_finishes_on_every_extension_before_the_next_starts():
    order: list[tuple[str, str]] = []

    class Stage(AgentExtension):
        def __init__(self, name: str, priority: int) -> None:
            self.name, self.priority = name, priority

        async def on_tool(self, context):
            order.append((self.name, "on_tool"))

        async def on_state(self, context):
            order.append((self.name, "on_state"))

        async def on_message(self, context):
            order.append((self.name, "on_message"))

        async def before_run(self, context):
            order.append((self.name, "before_run"))

    agent = await Agent.create(
        ProbeModel(answer("ok")), extensions=[Stage("b", 20), Stage("a", 10)]
    )
    await agent.run("hi")
    assert order == [
        ("a", "on_tool"),
        ("b", "on_tool"),
        ("a", "on_state"),
        ("b", "on_state"),
        ("a", "on_message"),
        ("b", "on_message"),
        ("a", "before_run"),
        ("b", "before_run"),
    ]


async def test_tools_registered_by_any_extension_are_visible_in_every_on_state():
    seen: list[set[str]] = []

    class Prompt(AgentExtension):
        priority = 10

        async def on_state(self, context):
            seen.append(set(context.tools))

    class Registers(AgentExtension):
        priority = 20

        async def on_tool(self, context):
            context.register_tool(lookup)

    model = ProbeModel(answer("ok"))
    agent = await Agent.create(model, extensions=[Prompt(), Registers()])
    await agent.run("hi")
    assert seen == [{"lookup"}]
    assert model.requests[0].tools == (lookup.definition,)


async def test_the_first_extension_is_the_outermost_model_middleware():
    order: list[str] = []

    class Layer(AgentExtension):
        def __init__(self, name: str, priority: int) -> None:
            self.name, self.priority = name, priority

        async def on_model_request(self, context, request, call_next):
            order.append(f"{self.name} enter")
            async for event in call_next(request):
                yield event
            order.append(f"{self.name} exit")

    async def provider(request):
        order.append("provider")
        for event in answer("ok"):
            yield event

    agent = await Agent.create(
        ProbeModel(provider), extensions=[Layer("inner", 20), Layer("outer", 10)]
    )
    await agent.run("hi")
    assert order == ["outer enter", "inner enter", "provider", "inner exit", "outer exit"]


async def test_model_middleware_may_replace_the_request():
    class ForceNoTools(AgentExtension):
        async def on_model_request(self, context, request, call_next):
            async for event in call_next(dataclasses.replace(request, tool_choice="none")):
                yield event

    model = ProbeModel(answer("ok"))
    agent = await Agent.create(model, extensions=[ForceNoTools()])
    await agent.run("hi")
    assert model.requests[0].tool_choice == "none"


async def test_the_first_extension_is_the_outermost_tool_middleware():
    order: list[str] = []

    class Layer(AgentExtension):
        def __init__(self, name: str, priority: int) -> None:
            self.name, self.priority = name, priority

        async def on_tool_call(self, context, call, call_next):
            order.append(f"{self.name} enter")
            result = await call_next(call)
            order.append(f"{self.name} exit")
            return result

    async def provider(request):
        for event in calls(call("lookup", key="k")):
            yield event

    agent = await Agent.create(
        ProbeModel(provider, answer("ok")),
        tools=[lookup],
        extensions=[Layer("inner", 20), Layer("outer", 10)],
    )
    await agent.run("hi")
    assert order == ["outer enter", "inner enter", "inner exit", "outer exit"]


async def test_tool_middleware_may_edit_the_arguments_before_the_handler_runs():
    class Rewrite(AgentExtension):
        async def on_tool_call(self, context, call, call_next):
            call.arguments["key"] = "rewritten"
            return await call_next(call)

    model = ProbeModel(calls(call("lookup", key="original")), answer("ok"))
    agent = await Agent.create(model, tools=[lookup], extensions=[Rewrite()])
    await agent.run("hi")
    tool_message = model.requests[1].messages[-1]
    assert isinstance(tool_message, ToolMessage)
    assert tool_message.content == "value of rewritten"


async def test_tool_middleware_may_answer_without_calling_the_handler():
    ran: list[str] = []

    class Cache(AgentExtension):
        async def on_tool_call(self, context, call, call_next):
            return ToolResult(content="cached")

    async def never(key: str) -> str:
        ran.append(key)
        return "fresh"

    model = ProbeModel(calls(call("lookup", key="k")), answer("ok"))
    agent = await Agent.create(
        model, tools=[dataclasses.replace(lookup, handler=never)], extensions=[Cache()]
    )
    await agent.run("hi")
    assert ran == []
    assert model.requests[1].messages[-1].content == "cached"


async def test_after_tool_may_edit_the_result_before_it_is_appended():
    class Redact(AgentExtension):
        async def after_tool(self, context, call, result, error):
            result.content = "[redacted]"

    model = ProbeModel(calls(call("lookup", key="secret")), answer("ok"))
    agent = await Agent.create(model, tools=[lookup], extensions=[Redact()])
    await agent.run("hi", config=AgentRunConfig(session_id="s"))
    assert model.requests[1].messages[-1].content == "[redacted]"
    assert agent.get_state("s").messages[-2].content == "[redacted]"


async def test_after_tool_sees_the_call_its_result_and_no_error_on_success():
    seen = []

    class Inspect(AgentExtension):
        async def after_tool(self, context, call, result, error):
            seen.append((call.name, call.arguments, result.content, result.success, error))

    model = ProbeModel(calls(call("lookup", key="k")), answer("ok"))
    agent = await Agent.create(model, tools=[lookup], extensions=[Inspect()])
    await agent.run("hi")
    assert seen == [("lookup", {"key": "k"}, "value of k", True, None)]


async def test_after_model_sees_the_response_whose_message_was_appended():
    seen = []

    class Inspect(AgentExtension):
        async def after_model(self, context, response):
            seen.append((response, context.state.messages[-1]))

    agent = await Agent.create(ProbeModel(answer("hello")), extensions=[Inspect()])
    await agent.run("hi")
    ((response, last),) = seen
    assert isinstance(response, ModelResponse)
    assert response.message.content == "hello"
    assert last is response.message


async def test_after_turn_sees_the_tool_calling_message_then_the_final_answer():
    seen: list[AssistantMessage] = []
    finals: list[AssistantMessage] = []

    class Inspect(AgentExtension):
        async def after_turn(self, context, result):
            seen.append(result)

        async def after_run(self, context, result):
            finals.append(result)

        async def on_success(self, context, result):
            finals.append(result)

    model = ProbeModel(calls(call("lookup", key="k")), answer("done"))
    agent = await Agent.create(model, tools=[lookup], extensions=[Inspect()])
    final = await agent.run("hi")
    assert [m.tool_calls != () for m in seen] == [True, False]
    assert seen[0].tool_calls[0].name == "lookup"
    assert seen[1].content == "done"
    assert finals == [final, final]


async def test_on_message_may_replace_the_input_before_it_is_appended():
    seen_in_before_run = []

    class Mode(AgentExtension):
        async def on_message(self, context):
            context.input_message = UserMessage(
                content=f"[plan mode] {context.input_message.content}"
            )

        async def before_run(self, context):
            seen_in_before_run.append(context.state.messages[-1])

    model = ProbeModel(answer("ok"))
    agent = await Agent.create(model, extensions=[Mode()])
    await agent.run("hi")
    assert model.requests[0].messages[-1] == UserMessage(content="[plan mode] hi")
    assert seen_in_before_run == [UserMessage(content="[plan mode] hi")]


async def test_an_input_replaced_by_something_other_than_a_user_message_fails_the_request():
    class Broken(AgentExtension):
        async def on_message(self, context):
            context.input_message = "not a message"

    model = ProbeModel(answer("ok"))
    agent = await Agent.create(model, extensions=[Broken()])
    with pytest.raises(AgentProtocolError, match="UserMessage"):
        await agent.run("hi")
    assert model.requests == []


async def test_messages_added_during_setup_are_published_before_the_input():
    log = HookLog()

    class Restore(AgentExtension):
        priority = 10

        async def on_state(self, context):
            context.add_message(AssistantMessage(content="restored greeting"))

    agent = await Agent.create(ProbeModel(answer("ok")), extensions=[Restore(), log])
    await agent.run("hi")
    ready = log.log.index(("phase", "loading_context", "ready"))
    assert log.log[ready - 2 : ready + 2] == [
        "on_message",
        ("appended", "assistant"),
        ("phase", "loading_context", "ready"),
        ("appended", "user"),
    ]


async def test_messages_restored_with_emit_new_false_are_not_published():
    log = HookLog()
    history = SeededHistory(
        UserMessage(content="old"), AssistantMessage(content="old"), priority=10
    )
    model = ProbeModel(answer("ok"))
    agent = await Agent.create(model, extensions=[history, log])
    await agent.run("hi")
    assert [entry for entry in log.log if entry[0] == "appended"] == [
        ("appended", "user"),
        ("appended", "assistant"),
    ]
    assert model.requests[0].messages[1:] == (
        UserMessage(content="old"),
        AssistantMessage(content="old"),
        UserMessage(content="hi"),
    )


async def test_context_edited_in_before_turn_and_before_model_reaches_the_provider():
    seen_by_later_hook = []

    class Early(AgentExtension):
        priority = 10

        async def before_turn(self, context):
            context.add_message(SystemMessage(content="from before_turn"))

        async def before_model(self, context, request):
            context.add_message(SystemMessage(content="from before_model"))
            context.tools.pop("lookup")

    class Late(AgentExtension):
        priority = 20

        async def before_model(self, context, request):
            seen_by_later_hook.append(
                ([m.content for m in request.messages], [t.name for t in request.tools])
            )

    model = ProbeModel(answer("ok"))
    agent = await Agent.create(model, tools=[lookup], extensions=[Early(), Late()])
    await agent.run("hi")
    contents = [m.content for m in model.requests[0].messages]
    assert "from before_turn" in contents
    assert "from before_model" in contents
    assert model.requests[0].tools == ()
    ((later_contents, later_tools),) = seen_by_later_hook
    assert "from before_model" in later_contents
    assert later_tools == []


async def test_the_model_request_is_frozen_for_hooks():
    errors = []

    class Mutate(AgentExtension):
        async def before_model(self, context, request):
            try:
                request.messages = ()
            except dataclasses.FrozenInstanceError as error:
                errors.append(error)

    agent = await Agent.create(ProbeModel(answer("ok")), extensions=[Mutate()])
    await agent.run("hi")
    assert len(errors) == 1


async def test_extension_pending_is_true_only_while_a_request_uses_it():
    observed = []

    class Watch(AgentExtension):
        async def before_run(self, context):
            observed.append(self.pending)

    watch = Watch()
    agent = await Agent.create(ProbeModel(answer("ok")), extensions=[watch])
    assert watch.pending is False
    await agent.run("hi")
    assert observed == [True]
    assert watch.pending is False


async def test_message_appended_events_carry_timing():
    timings = []

    class Watch(AgentExtension):
        async def on_event(self, context, event):
            if isinstance(event, MessageAppendedEvent):
                timings.append(event.timing)

    agent = await Agent.create(ProbeModel(answer("ok")), extensions=[Watch()])
    await agent.run("hi")
    assert len(timings) >= 2
    assert all(t.occurred_at.tzinfo is not None for t in timings)
    assert [t.completed_at for t in timings] == sorted(t.completed_at for t in timings)


async def test_tools_registered_in_a_request_belong_to_that_request_only():
    class FirstRequestOnly(AgentExtension):
        async def on_tool(self, context):
            if context.input_message.content == "first":
                context.register_tool(lookup)

    model = ProbeModel(answer("one"), answer("two"))
    agent = await Agent.create(model, extensions=[FirstRequestOnly()])
    config = AgentRunConfig(session_id="s")
    await agent.run("first", config=config)
    await agent.run("second", config=config)
    assert [t.name for t in model.requests[0].tools] == ["lookup"]
    assert model.requests[1].tools == ()


async def test_a_hook_set_on_the_instance_before_the_agent_is_built_runs():
    seen = []

    async def spy_before_run(context):
        seen.append(("before_run", context.session_id))

    async def spy_on_success(context, final):
        seen.append(("on_success", final.content))

    plain = AgentExtension()
    plain.before_run = spy_before_run
    plain.on_success = spy_on_success
    agent = await Agent.create(ProbeModel(answer("done")), extensions=[plain])
    await agent.run("hi", config=AgentRunConfig(session_id="s"))
    assert seen == [("before_run", "s"), ("on_success", "done")]


async def test_register_tool_refuses_a_plain_function_after_it_accepted_tools():
    """The check behind ``register_tool`` remembers a tool's class, never a refusal."""
    assert is_held_tool(lookup) and is_held_tool(lookup)
    assert not is_held_tool(lookup.handler)
    assert not is_held_tool(lookup.definition)

    class Registers(AgentExtension):
        async def on_tool(self, context):
            context.register_tool(lookup)
            with pytest.raises(TypeError, match="register_tool needs an AgentTool"):
                context.register_tool(lookup.handler)

    model = ProbeModel(answer("one"), answer("two"))
    agent = await Agent.create(model, extensions=[Registers()])
    config = AgentRunConfig(session_id="s")
    await agent.run("first", config=config)
    await agent.run("second", config=config)
    assert [[t.name for t in request.tools] for request in model.requests] == [["lookup"]] * 2
