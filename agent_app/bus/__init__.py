"""The session bus: leases, fan-out and replay, for one worker or many.

- ``base``: the ``SessionBus`` protocol, ``Lease``, the frame ``Marker`` and the
  ``BusListener`` a transport reports to;
- ``local``: ``LocalBus``, one process, in memory (the default);
- ``redis``: ``RedisBus``, many workers over Redis and the Channels layer (``REDIS_URL``);
- ``replay``: the replay buffer of a run's frames, and its shared stream's encoding;
- ``pool``: the Redis connection pool the transport and the limits share.

A transport never imports the session code (``agent_app.sessions``).
"""
