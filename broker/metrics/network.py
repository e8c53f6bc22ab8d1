"""Connection counts per listener, kept by the socket server (Kafka's
``socket-server-metrics``: connection-creation-total, connection-close-total; the open
count is their difference). Updated once per connection, read at scrape time."""

from __future__ import annotations


class ListenerStats:
    __slots__ = ("closed", "created")

    def __init__(self) -> None:
        self.created = 0
        self.closed = 0
