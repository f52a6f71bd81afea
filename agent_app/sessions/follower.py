"""The part of a live session that deals with the other workers (with ``REDIS_URL`` only).

``RemoteRuns`` is a mixin of ``agent_app.sessions.live.LiveSession``. A worker that has sockets on a
session but does not run its run *follows* it: it joined the session's group when its first
socket joined (``_follow``), forwards each batch of frames the owner sends
(``remote_frames``), replays a reconnecting socket from the shared replay stream
(``_replay_remote``), forwards replies and ``cancel`` to the owner (``_forward_reply``,
``_forward_cancel``), and watches the owner's lease (``_watch``): if it expires
unrenewed, this worker settles the dead run (``_recover``) and the session is free again.
The owner, in turn, answers forwarded requests (``serve_remote``) and stops its run if it
ever loses its lease (``lost_lease``). The mechanics — leases, inboxes, the stream — are
``agent_app.bus.redis``'s.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from agent_app.bus.redis import Lease, RemoteRun

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from agent_app.sessions.live import LiveSession, Subscriber
    from agent_app.sessions.replies import Verdict

__all__ = ["RemoteRuns"]

logger = logging.getLogger(__name__)


class RemoteRuns:
    """Following runs of other workers (a mixin of ``LiveSession``)."""

    async def _follow(self: LiveSession) -> None:
        """Join the session's group; learn whether another worker runs it (under the lock)."""
        cluster = self.cluster
        assert cluster is not None
        if not self.subscribed:
            await cluster.subscribe(self.session_id)
            self.subscribed = True
        if self._run is None:
            self._set_remote(await cluster.holder(self.session_id))

    def _set_remote(self: LiveSession, lease: Lease | None) -> None:
        """Follow the run ``lease`` names (None: no other worker runs one)."""
        cluster = self.cluster
        assert cluster is not None
        if lease is not None and (lease.worker == cluster.worker or lease.request_id == ""):
            lease = None  # our own lease: a run or a recovery of this process
        current = self.remote
        if lease is not None and current is not None and current.request_id == lease.request_id:
            if current.lease is None:
                current.lease = lease
            return
        if current is not None and current.watcher is not None:
            current.watcher.cancel()
        self.remote = None
        if lease is not None:
            remote = self.remote = RemoteRun(lease.request_id, lease)
            remote.watcher = asyncio.create_task(
                self._watch(remote), name=f"zett-lease-watch-{self.session_id}"
            )

    async def _replay_remote(
        self: LiveSession, subscriber: Subscriber, after_seq: int | None
    ) -> None:
        """Send a joining socket the remote run's frames after ``after_seq`` (under lock).

        When this worker already forwards the run to other sockets, the joining one gets
        the frames up to the last one forwarded; the rest reach it with the others. A
        client may have seen more than this worker forwarded so far (it was connected to
        another worker): the frames up to what it saw are then never sent to it again.
        """
        cluster = self.cluster
        assert cluster is not None and self.remote is not None
        following = bool(self.sockets)
        seen = after_seq or 0
        for seq, text in await cluster.replay(self.session_id, self.remote.request_id, after_seq):
            if following and seq > self.last_seq:
                break
            await subscriber.send_text(text)
            seen = max(seen, seq)
            if not following:
                self.last_seq = max(self.last_seq, seq)
        if seen > self.last_seq:
            self.floors[subscriber] = seen

    async def remote_frames(self: LiveSession, frames: list[list[Any]]) -> None:
        """Forward frames the owner sent: skip those already sent, fill a gap first."""
        async with self._lock:
            for seq, prev, text, marker, request_id in frames:
                if seq <= self.last_seq:
                    continue
                if prev > self.last_seq and self.sockets:
                    await self._fill_gap(request_id, seq)
                await self._send_local(text, seq)
                self.last_seq = seq
                if marker == "start" and self._run is None:
                    self._set_remote_started(request_id)
                elif (
                    marker == "end"
                    and self.remote is not None
                    and self.remote.request_id == request_id
                ):
                    self._set_remote(None)

    def _set_remote_started(self: LiveSession, request_id: str) -> None:
        """A run started on another worker: follow it (its lease is read when needed)."""
        if self.remote is not None and self.remote.request_id == request_id:
            return
        self._set_remote(None)
        remote = self.remote = RemoteRun(request_id)
        remote.watcher = asyncio.create_task(
            self._watch(remote), name=f"zett-lease-watch-{self.session_id}"
        )

    async def _fill_gap(self: LiveSession, request_id: str, before_seq: int) -> None:
        """Send the frames between the last one sent and ``before_seq`` (a lost message)."""
        assert self.cluster is not None
        for seq, text in await self.cluster.replay(self.session_id, request_id, self.last_seq):
            if seq >= before_seq:
                break
            await self._send_local(text, seq)
            self.last_seq = seq

    # --- requests to the owner ---------------------------------------------------------

    async def _owner(self: LiveSession) -> Lease | None:
        """The lease of the run another worker runs for this session, if any.

        The lease of the run this worker follows is known already (its watcher reads it
        while the run lives, and it is dropped with the run's last frame or the lease's
        end); only a run not followed yet costs a read.
        """
        assert self.cluster is not None
        remote = self.remote
        if remote is not None and remote.lease is not None:
            return remote.lease
        lease = await self.cluster.holder(self.session_id)
        if lease is None or lease.worker == self.cluster.worker or not lease.request_id:
            return None
        return lease

    async def _forward_reply(
        self: LiveSession,
        name: str,
        payload: dict[str, Any],
        answer: Callable[[Verdict], Awaitable[None]],
    ) -> Verdict | None:
        """Hand a reply to the worker that runs the run; None if no other worker runs one."""
        from agent_app.sessions.replies import Verdict

        lease = await self._owner()
        if lease is None:
            return None
        given: list[Verdict] = []

        async def on_answer(message: dict[str, Any]) -> None:
            verdict = Verdict(
                message.get("request_id"),
                list(message.get("accepted_by") or []),
                message.get("reason"),
            )
            given.append(verdict)
            await answer(verdict)

        assert self.cluster is not None
        reply = await self.cluster.call(
            lease,
            {"type": "zett.deliver", "session": self.session_id, "name": name, "payload": payload},
            on_answer,
        )
        if reply is None or not given:
            verdict = Verdict(None, [], "not_running")
            await answer(verdict)
            return verdict
        return given[0]

    async def _forward_cancel(self: LiveSession) -> bool:
        """Ask the worker that runs the run to cancel it; False if none runs one."""
        lease = await self._owner()
        if lease is None:
            return False
        assert self.cluster is not None

        async def ignore(message: dict[str, Any]) -> None:
            return None

        reply = await self.cluster.call(
            lease, {"type": "zett.cancel", "session": self.session_id}, ignore
        )
        return bool(reply and reply.get("ok"))

    async def serve_remote(self: LiveSession, message: dict[str, Any]) -> None:
        """Answer a reply or ``cancel`` another worker forwarded to this run's owner."""
        from agent_app.sessions.live import NotRunning

        cluster = self.cluster
        assert cluster is not None
        reply_to, ticket = message["reply_to"], message["ticket"]
        try:
            if message["type"] == "zett.deliver":

                async def answer(verdict: Verdict) -> None:
                    await cluster.answer(
                        reply_to,
                        ticket,
                        {
                            "request_id": verdict.request_id,
                            "accepted_by": verdict.accepted_by,
                            "reason": verdict.reason,
                        },
                    )

                await self.deliver(message["name"], message["payload"], answer, forwarded=True)
            else:
                try:
                    await self.cancel(forwarded=True)
                    ok = True
                except NotRunning:
                    ok = False
                await cluster.answer(reply_to, ticket, {"ok": ok})
        finally:
            self.registry.drop_if_idle(self)

    # --- the owner's lease -------------------------------------------------------------

    async def _watch(self: LiveSession, remote: RemoteRun) -> None:
        """Wait for the lease of ``remote`` to end; settle its run if it died with it."""
        cluster = self.cluster
        assert cluster is not None
        try:
            while True:
                lease = await cluster.holder(self.session_id)
                if lease is None or lease.request_id != remote.request_id:
                    break
                remote.lease = lease
                await asyncio.sleep(max(await cluster.ttl(self.session_id), 50) / 1000)
            async with self._lock:
                if self.remote is not remote:
                    return  # it ended normally: its last frame arrived
                self.remote = None
                if self._run is None:
                    await self._recover()
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("Watching the run of session %s failed", self.session_id)

    async def lost_lease(self: LiveSession, request_id: str) -> None:
        """Another worker took this run's lease (this one failed to renew it): stop."""
        run = self._run
        if run is not None and run.request_id == request_id and run.task is not None:
            run.lease_lost = True
            run.task.cancel()
            await asyncio.wait([run.task])
