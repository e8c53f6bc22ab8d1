"""The broker's network layer (Kafka's SocketServer / RequestChannel), on one uvloop loop.

- ``socket_server``: listeners, acceptors, connection quotas, idle sweeper, ordered stop;
- ``connection``: one client connection; frames in, muted until its response is out;
- ``request_channel``: the bounded request queue, IO workers, handler dispatch, outcomes;
- ``sendfile``: writing response parts (bytes, and FileSlices with ``os.sendfile``);
- ``quotas``: ``max.connections`` and ``max.connections.per.ip``.
"""
