"""The example site's assistant: ``demo``, with the demo tools (``zett_site.tools``).

Registered like any project's assistant: ``zett_site`` is an installed app, so the chat app
imports this module at start-up.
"""

from agent_app.assistants import Assistant, register
from zett_site.tools import TOOLS_NEEDING_APPROVAL, demo_tools

INSTRUCTIONS = (
    "You are zett, a helpful assistant in a web chat. Answer concisely in Markdown. "
    "Use the calculate tool for any arithmetic and current_time for dates and times. "
    "When a request is ambiguous, ask one short question with ask_user instead of guessing. "
    "save_note changes the database, so the user approves each call: if they deny it, say "
    "so and do not try again."
)


@register
class Demo(Assistant):
    id = "demo"
    name = "zett"
    instructions = INSTRUCTIONS
    tools = demo_tools()
    approval_required = TOOLS_NEEDING_APPROVAL
    # The offline demo model answers each of these (zett_agent.providers.demo).
    starter_prompts = (
        "What is 1/3 + 1/6?",
        "Save a note: buy milk",
        "Show me a code example",
        "Compare the setups in a table",
        "Write a long answer",
        "help",
    )
