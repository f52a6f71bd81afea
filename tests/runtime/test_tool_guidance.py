"""Tool snippets and guidelines rendered into a system message (docs/runtime.md, Tools)."""

from __future__ import annotations

from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.extensions.base import AgentExtension
from zett_agent.extensions.memory import InMemoryMessageAccumulator
from zett_agent.extensions.tool_guidelines import ToolGuidelinesExtension
from zett_agent.messages import AssistantMessage, SystemMessage, UserMessage
from zett_agent.tools.base import AgentTool, render_tool_guidance, tool

from .support import ProbeModel, SeededHistory, answer, lookup


@tool
async def weather(city: str) -> str:
    """Report the weather.

    Snippet:
        weather(city="Paris")

    Guidelines:
        - Use for current conditions only.
        - Name the city exactly.
    """
    return "sunny"


def test_guidance_has_a_snippets_section_and_a_guidelines_section():
    text = render_tool_guidance([lookup, weather])
    assert "Tool snippets" in text
    assert "Tool guidelines" in text
    assert text.index("Tool snippets") < text.index("Tool guidelines")
    assert 'lookup(key="colour")' in text
    assert 'weather(city="Paris")' in text


def test_each_tool_gets_a_heading_with_one_bullet_per_rule():
    lines = render_tool_guidance([lookup, weather]).splitlines()
    heading = lines.index("## weather")
    assert lines[heading + 1 : heading + 3] == [
        "- Use for current conditions only.",
        "- Name the city exactly.",
    ]
    assert "## lookup" in lines
    assert "- Use when the answer depends on stored values." in lines


def test_tools_keep_their_order_in_the_guidance():
    text = render_tool_guidance([weather, lookup])
    assert text.index("## weather") < text.index("## lookup")


def test_a_tool_without_a_snippet_still_gets_its_guidelines():
    bare = AgentTool(
        name="bare",
        description="A tool.",
        parameters={"type": "object", "properties": {}},
        handler=lambda: "ok",
        guidelines=("Use rarely.",),
    )
    text = render_tool_guidance([bare])
    assert "## bare" in text
    assert "- Use rarely." in text
    assert "Tool snippets" not in text


async def test_the_extension_puts_guidance_after_the_other_system_messages():
    rules_and_history = SeededHistory(
        SystemMessage(content="House rules."),
        UserMessage(content="earlier question"),
        AssistantMessage(content="earlier answer"),
        priority=10,
    )
    model = ProbeModel(answer("ok"))
    agent = await Agent.create(
        model,
        system_prompt="You are helpful.",
        tools=[lookup, weather],
        extensions=[rules_and_history, ToolGuidelinesExtension()],
    )
    await agent.run("hi", config=AgentRunConfig(session_id="s"))
    assert [m.content for m in model.requests[0].messages] == [
        "You are helpful.",
        "House rules.",
        render_tool_guidance([lookup, weather]),
        "earlier question",
        "earlier answer",
        "hi",
    ]
    assert isinstance(model.requests[0].messages[2], SystemMessage)


async def test_guidance_follows_a_system_message_added_after_the_restored_history():
    class AddsARule(AgentExtension):
        async def on_state(self, context):
            context.add_message(SystemMessage("Extra rule."))  # appended after the history

    model = ProbeModel(answer("one"), answer("two"))
    agent = await Agent.create(
        model,
        system_prompt="You are helpful.",
        tools=[lookup, weather],
        extensions=[InMemoryMessageAccumulator(), AddsARule(), ToolGuidelinesExtension()],
    )
    config = AgentRunConfig(session_id="s")
    await agent.run("first", config=config)
    await agent.run("second", config=config)
    guidance = render_tool_guidance([lookup, weather])
    assert [m.content for m in model.requests[0].messages] == [
        "You are helpful.",
        "Extra rule.",
        guidance,
        "first",
    ]
    assert [m.content for m in model.requests[1].messages] == [
        "You are helpful.",
        "first",
        "one",
        "Extra rule.",
        guidance,
        "second",
    ]


async def test_the_guidance_covers_tools_registered_by_extensions():
    class Registers(AgentExtension):
        async def on_tool(self, context):
            context.register_tool(weather)

    model = ProbeModel(answer("ok"))
    agent = await Agent.create(
        model, tools=[lookup], extensions=[ToolGuidelinesExtension(), Registers()]
    )
    await agent.run("hi", config=AgentRunConfig(session_id="s"))
    guidance = model.requests[0].messages[1].content
    assert "## lookup" in guidance
    assert "## weather" in guidance


async def test_no_tools_means_no_guidance_message():
    model = ProbeModel(answer("ok"))
    agent = await Agent.create(model, extensions=[ToolGuidelinesExtension()])
    await agent.run("hi", config=AgentRunConfig(session_id="s"))
    assert [type(m) for m in model.requests[0].messages] == [SystemMessage, UserMessage]
