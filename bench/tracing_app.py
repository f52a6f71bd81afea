"""What tracing costs a W1 request through the chat app: ``ZETT_OTEL`` off and on, one run.

Part of ``python -m bench.tracing`` (which runs the runtime-only figures first). The request
is W1's shape sent as a chat message over the app's real path: a socket through the ASGI
application (Channels' in-memory layer), the live session, the run, the ORM persistence on
a throw-away SQLite database, and a zero-latency model (``bench.zett_model:socket_model``,
message ``paced 20 0 tool``: one ``calculate`` call, then a 20-delta answer). Three
variants, each block on a fresh chat so each one builds its agent with its own setting:

- ``off``: ``ZETT_OTEL`` off, the default;
- ``sampled-out``: ``ZETT_OTEL`` on, the SDK's sampler dropping every trace;
- ``recording``: ``ZETT_OTEL`` on, every span recorded (5 per request: the runtime's four
  and the run's ``attempt 1``) through a ``SimpleSpanProcessor`` into an exporter that
  counts and drops them (no queue to drop spans from; a block that exported fewer than it
  asked for fails).

One global tracer provider serves both traced variants (the app's spans go to the global
one); its sampler is switched between them. CPU time is the whole process's: server side,
its database threads and the test client, whose share is the same in every variant.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
import uuid
from dataclasses import dataclass, field

#: The chat message of a W1-shaped request (``bench.zett_model.SocketModel``).
MESSAGE = "paced 20 0 tool"
SPANS_PER_REQUEST = 5
VARIANTS = ("off", "sampled-out", "recording")


@dataclass(slots=True)
class AppVariant:
    name: str
    cpu: list[float] = field(default_factory=list)
    overhead: list[float] = field(default_factory=list)


class _Switch:
    """A sampler that records every trace or none, as the benchmark says."""

    def __init__(self) -> None:
        from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON

        self.on, self.off = ALWAYS_ON, ALWAYS_OFF
        self.recording = True

    def should_sample(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        return (self.on if self.recording else self.off).should_sample(*args, **kwargs)

    def get_description(self) -> str:
        return "bench switch"


def _set_up_django(directory: str) -> str:
    """Configure the example site on a fresh SQLite file; return a browser's cookie."""
    os.environ["DJANGO_SETTINGS_MODULE"] = "zett_site.settings"
    os.environ["DATABASE_URL"] = f"sqlite:///{directory}/bench.sqlite3"
    os.environ["ZETT_MODEL"] = "bench.zett_model:socket_model"
    os.environ["ZETT_WS_RATE_BURST"] = "1000000"
    os.environ["ZETT_WS_RATE_PER_SECOND"] = "1000000"
    os.environ["ZETT_MAX_CHATS_PER_HOUR"] = "1000000"
    os.environ.pop("REDIS_URL", None)
    import django

    django.setup()
    from django.contrib.sessions.backends.db import SessionStore
    from django.core.management import call_command

    from agent_app.guard.access import BROWSER_KEY_FIELD

    call_command("migrate", interactive=False, verbosity=0)
    session = SessionStore()
    session[BROWSER_KEY_FIELD] = uuid.uuid4().hex
    session.create()
    return f"sessionid={session.session_key}"


class _Chat:
    """One socket on a fresh chat of the benchmark's browser."""

    def __init__(self, application, cookie: str) -> None:  # type: ignore[no-untyped-def]
        from channels.testing import WebsocketCommunicator

        self.socket = WebsocketCommunicator(
            application,
            f"/ws/sessions/{uuid.uuid4()}/",
            headers=[(b"origin", b"http://testserver"), (b"cookie", cookie.encode())],
        )

    async def open(self) -> None:
        connected, _ = await self.socket.connect(timeout=30)
        if not connected:
            raise RuntimeError("the benchmark's socket was refused")
        await self.socket.receive_json_from(30)  # session

    async def request(self) -> None:
        await self.socket.send_json_to({"type": "user_message", "content": MESSAGE})
        while True:
            frame = await self.socket.receive_json_from(30)
            kind = frame["type"]
            if kind == "agent_event" and frame["event"]["type"] == "run_completed":
                return
            if kind in ("run_failed", "error", "run_interrupted"):
                raise RuntimeError(f"the benchmark's run ended with {frame}")

    async def close(self) -> None:
        await self.socket.disconnect()


async def _block(application, cookie: str, requests: int, warmup: int) -> float:  # type: ignore[no-untyped-def]
    """CPU µs per request of ``requests`` requests on a fresh chat."""
    import gc

    chat = _Chat(application, cookie)
    await chat.open()
    try:
        for _ in range(warmup):  # the chat's first message stores it and builds its agent
            await chat.request()
        gc.collect()
        started = time.process_time()
        for _ in range(requests):
            await chat.request()
        return (time.process_time() - started) / requests * 1e6
    finally:
        await chat.close()


async def _run(cookie: str, requests: int, repetitions: int, warmup: int) -> dict:
    from django.test.utils import override_settings
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from bench.tracing_parts import CountingExporter
    from zett_site.asgi import application

    switch = _Switch()
    exporter = CountingExporter()
    provider = TracerProvider(sampler=switch)  # type: ignore[arg-type]
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    variants = [AppVariant(name) for name in VARIANTS]
    for repetition in range(repetitions):
        shift = repetition % len(variants)
        for variant in variants[shift:] + variants[:shift]:
            switch.recording = variant.name == "recording"
            provider.force_flush()
            before = exporter.spans
            with override_settings(ZETT_OTEL=variant.name != "off"):
                variant.cpu.append(await _block(application, cookie, requests, warmup))
            provider.force_flush()
            exported = exporter.spans - before
            expected = (requests + warmup) * SPANS_PER_REQUEST if switch.recording else 0
            if exported != expected:
                raise RuntimeError(f"app {variant.name}: {exported} spans, not {expected}")
        off = variants[0].cpu[-1]
        for variant in variants[1:]:
            variant.overhead.append(variant.cpu[-1] / off - 1)
        line = "  ".join(f"app {v.name} {v.cpu[-1]:,.1f}" for v in variants)
        print(f"  app rep {repetition + 1}/{repetitions}: {line} CPU µs/req", flush=True)
    provider.shutdown()
    return {
        "requests_per_block": requests,
        "repetitions": repetitions,
        "variants": [{"name": v.name, "cpu": v.cpu, "overhead": v.overhead} for v in variants],
    }


def run_app(requests: int, repetitions: int, warmup: int) -> dict:
    """Set up the app in this process and time its variants (see the module docstring)."""
    with tempfile.TemporaryDirectory(prefix="zett-bench-tracing-") as directory:
        cookie = _set_up_django(directory)
        return asyncio.run(_run(cookie, requests, repetitions, warmup))


def render_app(results: dict, *, judge: bool, targets: dict[str, float]) -> str:
    from bench.tracing_parts import cpu_cells, verdict

    lines = [
        "",
        "Through the chat app (socket, live session, run, SQLite persistence; process CPU):",
        "",
        "| request | ZETT_OTEL | CPU µs/request | min-max | overhead vs off | min-max |",
        "|---|---|---|---|---|---|",
    ]
    for variant in results["variants"]:
        lines.append(
            f"| W1 app | {variant['name']} | {cpu_cells(variant['cpu'], variant['overhead'])} |"
        )
    if judge:
        for variant in results["variants"][1:]:
            lines.append(
                verdict(f"W1 app, {variant['name']}", variant["overhead"], targets[variant["name"]])
            )
    return "\n".join(lines)
