"""Frames written straight to daphne's transport are the ones autobahn would write, and the
writer steps aside whenever the socket is not plainly open (``agent_app.websocket.direct``)."""

from __future__ import annotations

from collections import deque
from functools import partial
from typing import Any

import pytest
import txaio
from autobahn.twisted.websocket import WebSocketServerFactory
from autobahn.websocket.protocol import TrafficStats

from agent_app.websocket.direct import direct_writer, text_frame

txaio.use_twisted()


class Transport:
    def __init__(self) -> None:
        self.written: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.written.append(data)


class Server:
    """What the writer reads of daphne's server: its connections, and ``handle_reply``."""

    def __init__(self) -> None:
        self.connections: dict[Any, dict[str, Any]] = {}

    async def handle_reply(self, protocol: Any, message: dict[str, Any]) -> None:
        raise AssertionError("not called here")


def open_protocol(server: Server) -> Any:
    """An autobahn server protocol in the state daphne leaves an accepted socket in."""
    factory = WebSocketServerFactory()
    protocol = factory.buildProtocol(None)
    for name in protocol.CONFIG_ATTRS:
        setattr(protocol, name, getattr(factory, name))
    protocol.transport = Transport()
    protocol.state = protocol.STATE_OPEN
    protocol.send_queue = deque()
    protocol.trafficStats = TrafficStats()
    protocol._perMessageCompress = None
    protocol.trackedTimings = None
    protocol.log = txaio.make_logger()
    server.connections[protocol] = {"connected": 0}
    return protocol


@pytest.mark.parametrize("length", [1, 125, 126, 127, 65535, 65536, 70001])
def test_a_frame_is_byte_for_byte_what_autobahn_sends(length):
    server = Server()
    protocol = open_protocol(server)
    text = "é" * (length // 2) + "x" * (length % 2)  # two bytes a character, then one
    protocol.sendMessage(text.encode(), False)
    by_autobahn = b"".join(protocol.transport.written)
    protocol.transport.written.clear()

    write = direct_writer(partial(server.handle_reply, protocol))
    assert write is not None and write(text) is True
    assert b"".join(protocol.transport.written) == by_autobahn == text_frame(text.encode())


@pytest.mark.parametrize(
    "change",
    [
        lambda p, s: setattr(p, "state", p.STATE_CLOSING),
        lambda p, s: setattr(p, "state", p.STATE_CLOSED),
        lambda p, s: p.send_queue.append((b"queued", False)),
        lambda p, s: setattr(p, "_perMessageCompress", object()),
        lambda p, s: setattr(p, "autoFragmentSize", 4),
        lambda p, s: setattr(p, "maxMessagePayloadSize", 4),
        lambda p, s: setattr(p, "logFrames", True),
        lambda p, s: setattr(p, "logOctets", True),
        lambda p, s: s.connections[p].update(disconnected=1.0),
        lambda p, s: s.connections.pop(p),
    ],
    ids=[
        "closing",
        "closed",
        "frames-queued",
        "compressed",
        "fragmented",
        "payload-limit",
        "frames-logged",
        "octets-logged",
        "disconnected",
        "gone",
    ],
)
def test_the_writer_steps_aside_unless_the_socket_is_plainly_open(change):
    server = Server()
    protocol = open_protocol(server)
    write = direct_writer(partial(server.handle_reply, protocol))
    assert write is not None
    change(protocol, server)
    assert write("hello") is False
    assert protocol.transport.written == []


def test_empty_text_is_left_to_daphne_which_sends_nothing():
    server = Server()
    protocol = open_protocol(server)
    write = direct_writer(partial(server.handle_reply, protocol))
    assert write is not None and write("") is False
    assert protocol.transport.written == []


def test_a_frame_within_the_fragment_size_and_the_payload_limit_is_written():
    """daphne sets a payload limit (``websocket_max_message_size``) on every socket."""
    server = Server()
    protocol = open_protocol(server)
    protocol.autoFragmentSize = protocol.maxMessagePayloadSize = 5
    write = direct_writer(partial(server.handle_reply, protocol))
    assert write is not None and write("hello") is True
    assert protocol.transport.written == [text_frame(b"hello")]


def test_no_writer_for_a_send_that_is_not_daphnes():
    async def send(message: dict[str, Any]) -> None: ...

    assert direct_writer(send) is None
    assert direct_writer(partial(send)) is None
    masked = Server()
    protocol = open_protocol(masked)
    protocol.maskServerFrames = True
    assert direct_writer(partial(masked.handle_reply, protocol)) is None
