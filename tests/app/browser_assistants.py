"""A second assistant for the browser test of the picker (registered in the test server
through ``ZETT_ASSISTANTS``)."""

from agent_app.assistants import Assistant


class Helper(Assistant):
    id = "helper"
    name = "Helper"
    instructions = "You are Helper, a second assistant of the example site."
