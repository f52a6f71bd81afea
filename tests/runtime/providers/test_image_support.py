"""Which models take image parts (``accepts_images``), and that the adapters that say so
send them natively: an ``image_url`` data URL to OpenAI-compatible servers, a base64
``image`` block to Anthropic, both carrying exactly the bytes given."""

from __future__ import annotations

import base64

from zett_agent.messages import ImageBytesSource, ImageContent, TextContent, UserMessage
from zett_agent.providers.anthropic import AnthropicModel, anthropic_messages
from zett_agent.providers.demo import DemoModel
from zett_agent.providers.openai import OpenAIModel, chat_messages
from zett_agent.testing import ScriptedModel

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(40))
MESSAGE = UserMessage(
    [TextContent("What is this?"), ImageContent(ImageBytesSource(PNG, "image/png"))]
)


def test_the_provider_adapters_and_the_demo_say_they_take_images():
    assert OpenAIModel.accepts_images is True
    assert AnthropicModel.accepts_images is True
    assert DemoModel.accepts_images is True
    assert getattr(ScriptedModel(), "accepts_images", False) is False


def test_openai_gets_the_image_as_a_data_url_part():
    (sent,) = chat_messages((MESSAGE,))
    text, image = sent["content"]
    assert text == {"type": "text", "text": "What is this?"}
    assert image["type"] == "image_url"
    prefix = "data:image/png;base64,"
    assert image["image_url"]["url"].startswith(prefix)
    assert base64.b64decode(image["image_url"]["url"][len(prefix) :]) == PNG


def test_anthropic_gets_the_image_as_a_base64_block():
    (sent,) = anthropic_messages((MESSAGE,))
    text, image = sent["content"]
    assert text == {"type": "text", "text": "What is this?"}
    assert image["type"] == "image"
    assert image["source"]["type"] == "base64" and image["source"]["media_type"] == "image/png"
    assert base64.b64decode(image["source"]["data"]) == PNG
