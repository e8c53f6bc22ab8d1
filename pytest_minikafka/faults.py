"""Faults for users' tests (in-process brokers started with ``faults=True``).

``broker.faults`` has the rules; this is what a test calls::

    broker.faults.fail_next("Produce", "NOT_LEADER_OR_FOLLOWER", count=2)
    broker.faults.delay_next("Fetch", delay_ms=500)
    broker.faults.drop_next("Metadata")            # the connection closes, no answer
    broker.faults.drop_connections()               # every open connection, now
    broker.faults.count("Produce")                 # requests received (a retry shows here)

APIs by Kafka's name (``"Produce"``, ``"FindCoordinator"``) or key; errors by Kafka's name
(``"COORDINATOR_LOAD_IN_PROGRESS"``) or code. ``when=`` takes a function of the decoded
request (a ``protocol.messages`` dataclass) to pick which requests a rule applies to.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from broker.faults import FaultInjector

__all__ = ["Faults"]


class Faults:
    def __init__(self, injector: FaultInjector, close_connections: Callable[[], int]) -> None:
        self._injector = injector
        self._close_connections = close_connections

    def fail_next(self, api: int | str, error: int | str, count: int = 1, *,
                  when: Callable[[Any], bool] | None = None) -> None:
        """Answer the next ``count`` requests of ``api`` with ``error`` on every topic,
        partition, group or resource they name; they are not handled (nothing appended,
        committed or changed). Produce with acks=0 gets its connection closed instead."""
        self._injector.fail_next(api, error, count, when=when)

    def delay_next(self, api: int | str, delay_ms: int, count: int = 1, *,
                   when: Callable[[Any], bool] | None = None) -> None:
        """Handle the next ``count`` requests of ``api`` as usual but send each response
        ``delay_ms`` later (the connection's later requests wait behind it)."""
        self._injector.delay_next(api, delay_ms, count, when=when)

    def drop_next(self, api: int | str, count: int = 1, *,
                  when: Callable[[Any], bool] | None = None) -> None:
        """Close the connection of each of the next ``count`` requests of ``api`` instead of
        answering (unhandled: the client sees a disconnect and retries elsewhere or again)."""
        self._injector.drop_next(api, count, when=when)

    def drop_connections(self) -> int:
        """Close every client connection now; returns how many there were."""
        return self._close_connections()

    def count(self, api: int | str) -> int:
        """Requests of ``api`` received since the broker started (faulted ones included)."""
        return self._injector.count(api)

    def pending(self) -> int:
        """Requests still to be affected by the rules armed so far."""
        return self._injector.pending()

    def clear(self) -> None:
        """Disarm every rule."""
        self._injector.clear()
