"""``python manage.py check_model``: is the configured model reachable, and does it answer?

Sends one short prompt to the model named by ``--model`` or ``settings.ZETT_MODEL``, prints
the reply as it streams, then the usage and the latency. On failure it prints a diagnosis
that says what to fix (which variable holds the key, which URL could not be reached) and
exits with status 1. Ctrl-C cancels the call, which closes the HTTP connection at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agent_app import conf
from zett_agent.exceptions import AgentProtocolError
from zett_agent.messages import SystemMessage, UserMessage
from zett_agent.model import AgentModel, ModelEventType, ModelRequest, ModelResponse
from zett_agent.providers import load_model
from zett_agent.providers.base import (
    ProviderAuthError,
    ProviderConnectionError,
    ProviderError,
)

DEFAULT_PROMPT = "Reply with one short sentence to confirm that you can hear me."
SYSTEM_PROMPT = "You are being health-checked. Answer in one short sentence."


class Command(BaseCommand):
    help = (
        "Send one short prompt to the configured model (settings.ZETT_MODEL) and print the "
        "streamed reply, usage and latency, or a diagnosis of what is wrong."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--model",
            metavar="SPEC",
            help="Model spec to check instead of ZETT_MODEL, e.g. openai:gpt-4o-mini.",
        )
        parser.add_argument(
            "--prompt", default=DEFAULT_PROMPT, help="The prompt to send (default: %(default)r)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        spec = options["model"] or conf.ZETT_MODEL
        try:
            model = load_model(spec)
        except ValueError as error:
            raise CommandError(f"ZETT_MODEL={spec!r} is not usable: {error}") from error
        self.stdout.write(f"Model: {spec} ({model!r})")
        self.stdout.write(f"Prompt: {options['prompt']}")
        try:
            asyncio.run(self._check(model, options["prompt"]))
        except ProviderAuthError as error:
            raise CommandError(f"Authentication problem: {error}") from error
        except ProviderConnectionError as error:
            raise CommandError(
                f"Cannot reach the model server: {error}\n"
                "Is the server running, and is the URL (ZETT_OPENAI_BASE_URL for "
                "OpenAI-compatible servers) right?"
            ) from error
        except ProviderError as error:
            raise CommandError(f"The provider failed: {error}") from error
        except Exception as error:  # a custom model may fail in any way; say how
            raise CommandError(f"The model failed: {type(error).__name__}: {error}") from error

    async def _check(self, model: AgentModel, prompt: str) -> None:
        request = ModelRequest(messages=(SystemMessage(SYSTEM_PROMPT), UserMessage(prompt)))
        started = time.perf_counter()
        first_output: float | None = None
        section: ModelEventType | None = None
        response: ModelResponse | None = None
        try:
            async with contextlib.aclosing(model.stream(request)) as stream:
                async for event in stream:
                    if event.type is ModelEventType.COMPLETED:
                        response = event.response
                        continue
                    if first_output is None:
                        first_output = time.perf_counter() - started
                    if event.type in (ModelEventType.TEXT, ModelEventType.REASONING):
                        if event.type is not section:
                            label = (
                                "reasoning" if event.type is ModelEventType.REASONING else "reply"
                            )
                            self.stdout.write(f"\n--- {label} ---")
                            section = event.type
                        self.stdout.write(event.delta, ending="")
                        self.stdout.flush()
        finally:
            aclose = getattr(model, "aclose", None)
            if aclose is not None:
                await aclose()
        total = time.perf_counter() - started
        if response is None:
            raise AgentProtocolError("Model stream ended without a response")
        self._report(response, first_output, total)

    def _report(self, response: ModelResponse, first_output: float | None, total: float) -> None:
        message = response.message
        self.stdout.write("\n---")
        if not message.content:
            self.stdout.write(self.style.WARNING("The model returned no text."))
        for call in message.tool_calls:
            self.stdout.write(f"Tool call requested: {call.name}({call.arguments})")
        usage = response.usage
        self.stdout.write(
            f"Usage: {usage.input_tokens} input tokens ({usage.cache_read_tokens} cached), "
            f"{usage.output_tokens} output tokens ({usage.reasoning_tokens} reasoning)"
        )
        first = f"{first_output:.2f}s" if first_output is not None else "n/a"
        self.stdout.write(f"Latency: first output after {first}, complete after {total:.2f}s")
        if response.stop is not None:
            detail = f" ({response.stop.detail})" if response.stop.detail else ""
            self.stdout.write(
                self.style.WARNING(f"Generation stopped early: {response.stop.reason}{detail}")
            )
        self.stdout.write(self.style.SUCCESS(f"OK: {message.model or 'the model'} answered."))
