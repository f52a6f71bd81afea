"""``RedisBus``: the session bus of many worker processes — leases, fan-out and replay over Redis.

With ``REDIS_URL`` set, any worker may hold any socket of any session; nothing is sticky.
Where each piece of shared state lives, and who changes it (the rest of the story is in
``agent_app.bus.base`` and ``agent_app.sessions.live``):

- **The run lease** — Redis key ``zett:lease:<session>`` holding ``{worker, channel,
  request_id}``, set with ``SET NX PX``: at most one run per session across all processes.
  The process that starts a run takes it, renews it every third of ``ZETT_LEASE_SECONDS``
  while the run lives, and deletes it (only if still its own) when the run ends. A process
  that loses its lease (it did not renew in time: stopped, partitioned) cancels the run at
  once. A run is alive exactly while its lease exists.
- **Fan-out** — every worker with sockets on a session joins the session's Channels group
  (``zett.session.<id>``) with its own inbox channel (one per process). The lease holder
  sends each batch of frames to the group; each worker forwards them to its own sockets.
  Frames carry ``seq`` and the ``seq`` of the frame before, so a worker skips frames it
  already sent (its own, a replay's) and notices a gap (a lost message) and fills it from
  the replay stream.
- **Replay** — the lease holder mirrors its run's replay buffer (``agent_app.bus.replay``) to
  the Redis stream ``zett:replay:<session>``, whose entry ids are the frames' ``seq``: a
  socket that reconnects to any worker is replayed from there.
- **Requests to the owner** — a ``external_event``, ``steer`` or ``cancel`` that reaches a
  worker which does not run the session's run is sent to the owner's inbox; the owner
  answers with its verdict, which the receiving worker sends to the socket before it
  forwards any frame that followed (one inbox, read in order).
- **Failover** — a worker with sockets on a session whose run another worker holds watches
  the lease. When it expires unrenewed, the watcher takes the lease itself, settles the run
  as ``agent_app.durable.recovery`` does after a restart (``interrupted`` or ``paused``), tells the
  sockets, and lets the lease go: the session accepts new messages at once.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis
from channels.layers import get_channel_layer
from django.conf import settings

from agent_app.bus.base import BusListener, Lease, Marker
from agent_app.bus.pool import pooled_redis
from agent_app.bus.replay import text_from_fields

__all__ = ["RedisBus", "group_name"]

logger = logging.getLogger(__name__)

#: Most frames one fan-out message carries.
BATCH_FRAMES = 256
#: How long a worker waits for the owner's answer to a forwarded request, in seconds.
CALL_TIMEOUT = 10.0
#: How long a Redis command waits for a free connection (``agent_app.bus.pool``).
CONNECTION_WAIT = 10.0
#: How long the replay stream of an ended run is kept (a late gap can still be filled).
REPLAY_TTL_S = 120

_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


def group_name(session_id: str) -> str:
    return f"zett.session.{session_id}"


def _lease_key(session_id: str) -> str:
    return f"zett:lease:{session_id}"


def _replay_key(session_id: str) -> str:
    return f"zett:replay:{session_id}"


@dataclass(eq=False)
class _Outbox:
    """Frames a session's lease holder has yet to send to the other workers."""

    frames: list[list[Any]] = field(default_factory=list)
    task: asyncio.Task[None] | None = None
    drained: asyncio.Event = field(default_factory=asyncio.Event)


class RedisBus:
    """This process's part in the cluster: its inbox, its leases, its fan-out."""

    def __init__(self, listener: BusListener, url: str, worker: str) -> None:
        self.listener = listener
        self.worker = worker
        self.redis = pooled_redis(url, wait=CONNECTION_WAIT)
        self.layer = get_channel_layer()
        self.lease_ms = int(float(getattr(settings, "ZETT_LEASE_SECONDS", 10)) * 1000)
        self.channel: str | None = None
        self._renew = self.redis.register_script(_RENEW)
        self._release = self.redis.register_script(_RELEASE)
        self._started = asyncio.Lock()
        self._listener: asyncio.Task[None] | None = None
        self._renewer: asyncio.Task[None] | None = None
        #: Leases this process holds, by session.
        self._held: dict[str, Lease] = {}
        #: Forwarded requests waiting for the owner's answer, by ticket.
        self._calls: dict[str, tuple[asyncio.Future[dict[str, Any]], Callable[..., Any]]] = {}
        self._outboxes: dict[str, _Outbox] = {}
        self._tasks: set[asyncio.Future[None]] = set()

    # --- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        """Open this process's inbox and start reading it (once)."""
        async with self._started:
            if self.channel is not None:
                return
            # The layer's own prefix, as every consumer's channel: ``RedisChannelLayer``
            # reads all of a process's channels through one blocking pop on one key per
            # prefix, under one lock, so a channel of another prefix starves the others.
            self.channel = await self.layer.new_channel()
            self._listener = asyncio.create_task(self._listen(), name="zett-cluster-inbox")
            self._renewer = asyncio.create_task(self._keep_leases(), name="zett-lease-renewal")

    async def close(self) -> None:
        """Stop reading the inbox and renewing leases; close the connections."""
        for outbox in list(self._outboxes.values()):
            if outbox.task is not None:
                await asyncio.wait([outbox.task])
        background = [t for t in (self._listener, self._renewer, *self._tasks) if t is not None]
        for task in background:
            task.cancel()
        await asyncio.gather(*background, return_exceptions=True)
        # This loop's pub/sub connections and their reader (the handshake refuser of
        # Channels opens them too, for the channel it never uses). ``RedisChannelLayer``'s
        # ``flush`` would delete every worker's groups and queued messages: only its
        # connections are closed.
        close = getattr(self.layer, "close_pools", None) or self.layer.flush
        await close()
        self.channel = None
        await self.redis.aclose()

    # --- leases ------------------------------------------------------------------------

    async def acquire(self, session_id: str, request_id: str) -> Lease | None:
        """Take the session's run lease; None when another run holds it."""
        await self.start()
        assert self.channel is not None
        lease = Lease(self.worker, self.channel, request_id)
        taken = await self.redis.set(
            _lease_key(session_id), lease.encode(), nx=True, px=self.lease_ms
        )
        if not taken:
            return None
        self._held[session_id] = lease
        return lease

    async def release(self, session_id: str) -> None:
        lease = self._held.pop(session_id, None)
        if lease is not None:
            try:
                await self._release(keys=[_lease_key(session_id)], args=[lease.encode()])
            except aioredis.RedisError:
                logger.warning("Could not release the lease of session %s", session_id)

    async def holder(self, session_id: str) -> Lease | None:
        """The lease of the session's active run, if any process holds one."""
        return Lease.decode(await self.redis.get(_lease_key(session_id)))

    async def ttl(self, session_id: str) -> int:
        """Milliseconds left on the session's lease (negative: none)."""
        return int(await self.redis.pttl(_lease_key(session_id)))

    async def is_live(self, session_id: str, request_id: str) -> bool:
        lease = await self.holder(session_id)
        return lease is not None and lease.request_id == request_id

    async def _keep_leases(self) -> None:
        """Renew every held lease a third of the lease time before it could expire.

        All of them in one round trip: renewed one after another, a worker holding a few
        hundred runs took seconds per round under load, and the last leases of a round
        expired before their turn came (their runs were cut off and taken over).
        """
        while True:
            await asyncio.sleep(self.lease_ms / 3000)
            held = list(self._held.items())
            if not held:
                continue
            try:
                kept = await self._renew_all(held)
            except aioredis.RedisError:
                logger.warning("Could not renew the leases of %d sessions", len(held))
                continue
            for (session_id, lease), renewed in zip(held, kept, strict=True):
                if not renewed and self._held.get(session_id) is lease:
                    logger.error(
                        "Lost the lease of session %s: stopping its run %s",
                        session_id,
                        lease.request_id,
                    )
                    self._held.pop(session_id, None)
                    self._spawn(self.listener.lease_lost(session_id, lease.request_id))

    async def _renew_all(self, held: list[tuple[str, Lease]]) -> list[Any]:
        """Run the renewal script for each ``(session, lease)`` in one pipeline; its results."""
        pipe = self.redis.pipeline(transaction=False)
        for session_id, lease in held:
            # On a pipeline this only queues the call (and the script's loading).
            await self._renew(
                keys=[_lease_key(session_id)], args=[lease.encode(), self.lease_ms], client=pipe
            )
        return await pipe.execute()

    # --- fan-out -----------------------------------------------------------------------

    async def subscribe(self, session_id: str) -> None:
        """Receive the session's frames from the other workers."""
        await self.start()
        await self.layer.group_add(group_name(session_id), self.channel)

    async def unsubscribe(self, session_id: str) -> None:
        if self.channel is not None:
            await self.layer.group_discard(group_name(session_id), self.channel)

    def publish(self, session_id: str, frame: list[Any]) -> Awaitable[None] | None:
        """Queue ``[seq, prev_seq, text, marker, request_id]`` for the others (in order).

        Returns an awaitable when the queue is long: the caller waits for it to drain
        (back-pressure), so a run never races ahead of Redis.
        """
        outbox = self._outboxes.get(session_id)
        if outbox is None:
            outbox = self._outboxes[session_id] = _Outbox()
        outbox.frames.append(frame)
        if outbox.task is None or outbox.task.done():
            outbox.drained.clear()
            outbox.task = asyncio.create_task(
                self._flush(session_id, outbox), name=f"zett-fanout-{session_id}"
            )
        if len(outbox.frames) > 4 * BATCH_FRAMES:
            return outbox.drained.wait()
        return None

    async def flushed(self, session_id: str) -> None:
        """Wait until every queued frame of the session went out."""
        outbox = self._outboxes.get(session_id)
        if outbox is not None and outbox.task is not None:
            await asyncio.wait([outbox.task])

    def rewrite_replay(
        self, session_id: str, request_id: str, entries: list[tuple[int, dict[str, str]]]
    ) -> None:
        """Queue a rewrite of the replay stream (the owner merged its buffer), in order."""
        self.publish(session_id, [None, None, entries, Marker.REWRITE, request_id])

    async def _flush(self, session_id: str, outbox: _Outbox) -> None:
        """Send the queued frames, batch by batch, in order: mirrored first, then fanned out."""
        try:
            while outbox.frames:
                batch = outbox.frames[:BATCH_FRAMES]
                del outbox.frames[:BATCH_FRAMES]
                try:
                    await self._mirror_and_send(session_id, batch)
                except Exception:
                    logger.exception("Could not send frames of session %s to others", session_id)
        finally:
            outbox.drained.set()
            if not outbox.frames and self._outboxes.get(session_id) is outbox:
                del self._outboxes[session_id]

    async def _mirror_and_send(self, session_id: str, batch: list[list[Any]]) -> None:
        """Apply the batch to the replay stream (entry id = the frame's seq), then publish it.

        Both in one ``MULTI``/``EXEC``, one round trip: the stream entries are written
        before the ``PUBLISH`` runs, so a worker that learns of a frame can always replay
        it. The settings put the Channels layer on this same Redis; the group message is
        serialized as the layer itself would. A layer without Redis pub/sub (none in the
        settings) gets it through ``group_send`` once the stream is written.
        """
        key = _replay_key(session_id)
        pipe = self.redis.pipeline(transaction=True)
        frames = []
        for frame in batch:
            seq, _prev, text, marker, request_id = frame
            if marker == Marker.REWRITE:
                pipe.delete(key)
                for entry_seq, fields in text:
                    pipe.xadd(key, {**fields, "r": request_id}, id=f"{entry_seq}-0")
                continue
            frames.append(frame)
            if marker == Marker.START:
                pipe.delete(key)
            if marker == Marker.KEPT or marker == Marker.START:
                pipe.xadd(key, {"t": text, "r": request_id}, id=f"{seq}-0")
            elif marker == Marker.END:
                pipe.expire(key, REPLAY_TTL_S)
        group = group_name(session_id)
        message = {
            "type": "zett.frames",
            "session": session_id,
            "worker": self.worker,
            "frames": frames,
        }
        channel = self._group_channel(group) if frames else None
        if channel is not None:
            pipe.publish(channel, self.layer.serialize(message))
        await pipe.execute()
        if frames and channel is None:
            await self.layer.group_send(group, message)

    def _group_channel(self, group: str) -> str | None:
        """The pub/sub channel the layer publishes ``group``'s messages on, if it has one."""
        name_of = getattr(self.layer, "_get_group_channel_name", None)
        return name_of(group) if callable(name_of) and hasattr(self.layer, "serialize") else None

    async def replay(
        self, session_id: str, request_id: str, after_seq: int | None
    ) -> list[tuple[int, str]]:
        """``(seq, text)`` of the run ``request_id``'s frames after ``after_seq``.

        Only that run's: right after a run starts, the stream may still hold the frames of
        the one before it (the new run's first batch has not been mirrored yet).
        """
        start = "-" if after_seq is None else f"{after_seq + 1}-0"
        entries = await self.redis.xrange(_replay_key(session_id), min=start)
        frames = []
        for entry_id, raw in entries:
            fields = {key.decode(): value.decode() for key, value in raw.items()}
            if fields.pop("r", None) != request_id:
                continue
            frames.append((int(entry_id.split(b"-")[0]), text_from_fields(fields, after_seq)))
        return frames

    # --- requests to the owner ---------------------------------------------------------

    async def call(
        self, lease: Lease, message: dict[str, Any], on_answer: Callable[[dict[str, Any]], Any]
    ) -> dict[str, Any] | None:
        """Send a request to the owner's inbox; ``on_answer`` runs in the inbox reader.

        Running the answer's handling in the reader (which reads this process's inbox in
        order) is what makes a verdict reach its socket before the frames it caused.
        """
        await self.start()
        ticket = uuid.uuid4().hex
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._calls[ticket] = (future, on_answer)
        try:
            await self.layer.send(
                lease.channel, {**message, "ticket": ticket, "reply_to": self.channel}
            )
            return await asyncio.wait_for(future, CALL_TIMEOUT)
        except TimeoutError:
            return None
        finally:
            self._calls.pop(ticket, None)

    async def answer(self, reply_to: str, ticket: str, body: dict[str, Any]) -> None:
        await self.layer.send(reply_to, {"type": "zett.answer", "ticket": ticket, **body})

    async def _listen(self) -> None:
        """Read this process's inbox, one message at a time, in order."""
        assert self.channel is not None
        while True:
            message = await self.layer.receive(self.channel)
            try:
                await self._dispatch(message)
            except Exception:
                logger.exception(
                    "Could not handle a cluster message of type %s", message.get("type")
                )

    async def _dispatch(self, message: dict[str, Any]) -> None:
        kind = message.get("type")
        if kind == "zett.frames":
            if message.get("worker") == self.worker:
                return  # our own frames: our sockets already have them
            await self.listener.session_frames(message["session"], message["frames"])
        elif kind == "zett.answer":
            pending = self._calls.get(message["ticket"])
            if pending is not None:
                future, on_answer = pending
                await on_answer(message)
                if not future.done():
                    future.set_result(message)
        elif kind in ("zett.deliver", "zett.cancel"):
            self._spawn(self.listener.owner_request(message["session"], message))

    def _spawn(self, work: Awaitable[None]) -> None:
        """Run ``work`` in a task of its own, kept until it ends."""
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
