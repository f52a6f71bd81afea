"""An assistant that hands over to people (``handoff = True``), for the browser tests of
the support features (registered in their server through ``ZETT_ASSISTANTS``)."""

from agent_app.assistants import Assistant


class Support(Assistant):
    id = "support"
    name = "Support"
    instructions = "You help customers; hand over to a person when they ask for one."
    handoff = True
