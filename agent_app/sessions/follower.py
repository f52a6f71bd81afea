"""The follower: how a session follows a run that another worker runs.

A worker that has sockets on a session but does not run its run *follows* it: it
subscribes to the session's frames when its first socket joins (``follow``), forwards
each batch of frames the owner sends (``remote_frames``), replays a reconnecting socket
from the shared replay stream (``replay_to``), forwards replies and ``cancel`` to the
owner (``forward_reply``, ``forward_cancel``), and watches the owner's lease (``_watch``):
if it expires unrenewed, or the owner lets it go because it shuts down (``Marker.HANDOVER``:
looked at again at once), this worker settles the run — continuing it, where it can.
The owner, in turn, answers forwarded requests (``serve``). The mechanics — leases,
inboxes, the stream — are the session bus's (``agent_app.bus``); with one process
(``LocalBus``) every lease is this process's own, so there is never a run to follow.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from agent_app.bus.base import Lease, Marker, SessionBus
from agent_app.protocol.frames import ReplyReason
from agent_app.protocol.refusals import NotRunning
from agent_app.sessions.fanout import Feed, Subscriber
from agent_app.sessions.replies import Verdict
from agent_app.sessions.run import Run
from agent_app.sessions.settling import Settler

__all__ = ["Follower", "RemoteRun"]

logger = logging.getLogger(__name__)


@dataclass(eq=False)
class RemoteRun:
    """A run of this session that another worker runs."""

    request_id: str
    #: Its lease, once read (a run learnt of from its first frame has none yet).
    lease: Lease | None = None
    watcher: asyncio.Task[None] | None = None
    #: Set when its owner said it hands the run over: the lease goes within moments.
    handed_over: asyncio.Event = field(default_factory=asyncio.Event)


class FollowerHost(Protocol):
    """What the follower needs of its session (``LiveSession``)."""

    session_id: str
    feed: Feed
    bus: SessionBus

    @property
    def run(self) -> Run | None: ...

    settler: Settler

    async def deliver(
        self,
        name: str,
        payload: dict[str, Any],
        answer: Callable[[Verdict], Awaitable[None]],
        *,
        forwarded: bool = False,
    ) -> Verdict: ...

    async def cancel(self, *, forwarded: bool = False) -> None: ...

    def check_idle(self) -> None: ...


class Follower:
    """Following the runs other workers run for one session (see the module docstring)."""

    def __init__(self, host: FollowerHost) -> None:
        self.host = host
        #: A run of this session that another worker runs.
        self.remote: RemoteRun | None = None
        #: Whether this worker receives the session's frames from others.
        self.subscribed = False
        #: Futures resolved when the last frame of a remote run is forwarded (``ended``).
        self._ends: dict[str, set[asyncio.Future[None]]] = {}

    def ended(self, request_id: str) -> asyncio.Future[None]:
        """Resolved once the last frame of the remote run ``request_id`` was sent to this
        process's sockets: a frame sent after it reaches them after the whole run. The
        caller's own future: cancel it when it no longer waits."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiting = self._ends.setdefault(request_id, set())
        waiting.add(future)

        def forget(_: asyncio.Future[None]) -> None:
            waiting.discard(future)
            if not waiting and self._ends.get(request_id) is waiting:
                del self._ends[request_id]

        future.add_done_callback(forget)
        return future

    async def follow(self) -> None:
        """Subscribe to the session; learn whether another worker runs it (under the lock)."""
        host = self.host
        if not self.subscribed:
            await host.bus.subscribe(host.session_id)
            self.subscribed = True
        if host.run is None:
            self.set_remote(await host.bus.holder(host.session_id))

    def set_remote(self, lease: Lease | None) -> None:
        """Follow the run ``lease`` names (None: no other worker runs one)."""
        bus = self.host.bus
        if lease is not None and (lease.worker == bus.worker or lease.request_id == ""):
            lease = None  # our own lease: a run or a recovery of this process
        current = self.remote
        if lease is not None and current is not None and current.request_id == lease.request_id:
            if current.lease is None:
                current.lease = lease
            return
        self.stop()
        if lease is not None:
            self._start_following(RemoteRun(lease.request_id, lease))

    def _start_following(self, remote: RemoteRun) -> None:
        self.remote = remote
        remote.watcher = asyncio.create_task(
            self._watch(remote), name=f"zett-lease-watch-{self.host.session_id}"
        )

    def stop(self) -> None:
        """Follow no run any more (the session is dropped, or runs here now)."""
        current, self.remote = self.remote, None
        if current is not None and current.watcher is not None:
            current.watcher.cancel()

    async def replay_to(self, subscriber: Subscriber, after_seq: int | None) -> None:
        """Send a joining socket the remote run's frames after ``after_seq`` (under lock).

        When this worker already forwards the run to other sockets, the joining one gets
        the frames up to the last one forwarded; the rest reach it with the others. A
        client may have seen more than this worker forwarded so far (it was connected to
        another worker): the frames up to what it saw are then never sent to it again.
        """
        host, feed = self.host, self.host.feed
        assert self.remote is not None
        following = bool(feed.sockets)
        seen = after_seq or 0
        frames = await host.bus.replay(host.session_id, self.remote.request_id, after_seq)
        for seq, text in frames:
            if following and seq > feed.last_seq:
                break
            await subscriber.send_text(text)
            seen = max(seen, seq)
            if not following:
                feed.last_seq = max(feed.last_seq, seq)
        if seen > feed.last_seq:
            feed.floors[subscriber] = seen

    async def remote_frames(self, frames: list[list[Any]]) -> None:
        """Forward frames the owner sent: skip those already sent, fill a gap first."""
        feed = self.host.feed
        async with feed.lock:
            for seq, prev, text, marker, request_id in frames:
                if marker == Marker.HANDOVER:
                    if self.remote is not None and self.remote.request_id == request_id:
                        self.remote.handed_over.set()  # its watcher looks again at once
                    continue
                if seq <= feed.last_seq:
                    continue
                if prev > feed.last_seq and feed.sockets:
                    await self._fill_gap(request_id, seq)
                await feed.send_local(text, seq)
                feed.last_seq = seq
                if marker == Marker.START and self.host.run is None:
                    self._remote_started(request_id)
                elif marker == Marker.END:
                    if self.remote is not None and self.remote.request_id == request_id:
                        self.set_remote(None)
                    for end in tuple(self._ends.get(request_id, ())):
                        if not end.done():
                            end.set_result(None)

    def _remote_started(self, request_id: str) -> None:
        """A run started on another worker: follow it (its lease is read when needed)."""
        if self.remote is not None and self.remote.request_id == request_id:
            return
        self.stop()
        self._start_following(RemoteRun(request_id))

    async def _fill_gap(self, request_id: str, before_seq: int) -> None:
        """Send the frames between the last one sent and ``before_seq`` (a lost message)."""
        host, feed = self.host, self.host.feed
        for seq, text in await host.bus.replay(host.session_id, request_id, feed.last_seq):
            if seq >= before_seq:
                break
            await feed.send_local(text, seq)
            feed.last_seq = seq

    # --- requests to the owner ---------------------------------------------------------

    async def _owner(self) -> Lease | None:
        """The lease of the run another worker runs for this session, if any.

        The lease of the run this worker follows is known already (its watcher reads it
        while the run lives, and it is dropped with the run's last frame or the lease's
        end); only a run not followed yet costs a read.
        """
        remote = self.remote
        if remote is not None and remote.lease is not None:
            return remote.lease
        bus = self.host.bus
        lease = await bus.holder(self.host.session_id)
        if lease is None or lease.worker == bus.worker or not lease.request_id:
            return None
        return lease

    async def forward_reply(
        self, name: str, payload: dict[str, Any], answer: Callable[[Verdict], Awaitable[None]]
    ) -> Verdict | None:
        """Hand a reply to the worker that runs the run; None if no other worker runs one."""
        lease = await self._owner()
        if lease is None:
            return None
        given: list[Verdict] = []

        async def on_answer(message: dict[str, Any]) -> None:
            reason = message.get("reason")
            verdict = Verdict(
                message.get("request_id"),
                list(message.get("accepted_by") or []),
                None if reason is None else ReplyReason(reason),
                message.get("detail"),
            )
            given.append(verdict)
            await answer(verdict)

        session_id = self.host.session_id
        request = {"type": "zett.deliver", "session": session_id, "name": name, "payload": payload}
        reply = await self.host.bus.call(lease, request, on_answer)
        if reply is None or not given:
            verdict = Verdict(None, [], ReplyReason.NOT_RUNNING)
            await answer(verdict)
            return verdict
        return given[0]

    async def forward_cancel(self) -> bool:
        """Ask the worker that runs the run to cancel it; False if none runs one."""
        lease = await self._owner()
        if lease is None:
            return False

        async def ignore(message: dict[str, Any]) -> None:
            return None

        request = {"type": "zett.cancel", "session": self.host.session_id}
        reply = await self.host.bus.call(lease, request, ignore)
        return bool(reply and reply.get("ok"))

    async def serve(self, message: dict[str, Any]) -> None:
        """Answer a reply or ``cancel`` another worker forwarded to this run's owner."""
        host = self.host
        bus = host.bus
        reply_to, ticket = message["reply_to"], message["ticket"]
        try:
            if message["type"] == "zett.deliver":

                async def answer(verdict: Verdict) -> None:
                    body = {
                        "request_id": verdict.request_id,
                        "accepted_by": verdict.accepted_by,
                        "reason": verdict.reason,
                        "detail": verdict.detail,
                    }
                    await bus.answer(reply_to, ticket, body)

                await host.deliver(message["name"], message["payload"], answer, forwarded=True)
            else:
                try:
                    await host.cancel(forwarded=True)
                    ok = True
                except NotRunning:
                    ok = False
                await bus.answer(reply_to, ticket, {"ok": ok})
        finally:
            host.check_idle()

    # --- the owner's lease -------------------------------------------------------------

    async def _until_lease_may_end(self, remote: RemoteRun) -> None:
        """Sleep until the lease may have ended: its time left, or moments after the owner
        said it hands the run over."""
        if remote.handed_over.is_set():
            await asyncio.sleep(0.02)
            return
        seconds = max(await self.host.bus.ttl(self.host.session_id), 50) / 1000
        try:
            async with asyncio.timeout(seconds):
                await remote.handed_over.wait()
        except TimeoutError:
            pass

    async def _watch(self, remote: RemoteRun) -> None:
        """Wait for the lease of ``remote`` to end; settle its run if it died with it."""
        host = self.host
        bus, session_id = host.bus, host.session_id
        try:
            while True:
                lease = await bus.holder(session_id)
                if lease is None or lease.request_id != remote.request_id:
                    break
                remote.lease = lease
                await self._until_lease_may_end(remote)
            async with host.feed.lock:
                if self.remote is not remote:
                    return  # it ended normally: its last frame arrived
                self.remote = None
                if host.run is None:
                    await host.settler.settle()
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("Watching the run of session %s failed", session_id)
