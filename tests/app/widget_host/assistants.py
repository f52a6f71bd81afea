"""The host site's assistant for the widget tests: the demo's note tool (which needs
approval), ``ask_user``, and one host-page tool the shop page answers."""

from agent_app.assistants import Assistant
from zett_agent.tools.base import tool
from zett_site.tools import save_note


@tool
def highlight_product(product_id: str) -> str:
    """Highlight a product on the page the customer is looking at.

    Args:
        product_id: The product's id, as the page shows it.

    Guidelines:
        - Use it when the customer asks where a product is.
    """
    raise AssertionError("a browser tool never runs on the server")


class Shopper(Assistant):
    id = "shopper"
    name = "Shop helper"
    instructions = "You help customers of the test shop."
    tools = [save_note]
    approval_required = {"save_note"}
    browser_tools = [highlight_product]


class Support(Shopper):
    """What the examples of docs/client.md talk to (its own scripted model)."""

    id = "support"
    name = "Support"
    model = "tests.app.widget_host.docs_model:DocsModel"


class Second(Assistant):
    id = "second"
    name = "Second helper"
    instructions = "A second assistant, for two widgets on one page."
