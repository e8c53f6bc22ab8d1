"""What a test holds of a running broker, wherever it runs (``BrokerHandle``), and the
properties it starts with.

A broker listens on an ephemeral port of 127.0.0.1 (``listeners=PLAINTEXT://127.0.0.1:0``)
with a log dir of its own unless the properties say otherwise; after the first start its
port is pinned, so ``restart()`` brings it back on the same bootstrap address (clients
reconnect to it).
"""

from __future__ import annotations

import contextlib
import re
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_minikafka.topics import TopicsSpec, create_topics

if TYPE_CHECKING:
    from pytest_minikafka.faults import Faults

__all__ = ["BrokerError", "BrokerHandle", "base_properties", "pinned_listeners"]

START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 60.0


class BrokerError(RuntimeError):
    """A broker did not start, did not stop cleanly, or was asked for what it cannot do."""


def base_properties(log_dir: Path, properties: Mapping[str, object] | None) -> dict[str, str]:
    """A test broker's properties under the caller's ``properties`` (Kafka's names; values
    are turned into strings): 127.0.0.1 on an ephemeral port, ``log_dir``, and two test
    settings Kafka's own test harness and development images use too: one partition for
    ``__consumer_offsets`` (Kafka's 50 cost time a test never needs) and no initial
    rebalance delay (Kafka's 3 s would hold every consumer group's first join)."""
    props = {
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "log.dirs": str(log_dir),
        "offsets.topic.num.partitions": "1",
        "group.initial.rebalance.delay.ms": "0",
    }
    for key, value in (properties or {}).items():
        props[key] = str(value).lower() if isinstance(value, bool) else str(value)
    return props


_LISTENER = re.compile(r"([A-Za-z0-9_]+)://(\[[^\]]*\]|[^:]*):(\d+)")


def pinned_listeners(listeners: str, bound: Mapping[str, int]) -> str:
    """``listeners`` with each port 0 replaced by the port its listener got (by name)."""
    out = []
    for entry in (e.strip() for e in listeners.split(",") if e.strip()):
        match = _LISTENER.fullmatch(entry)
        if match is None or match.group(3) != "0" or match.group(1).upper() not in bound:
            out.append(entry)
        else:
            out.append(f"{match.group(1)}://{match.group(2)}:{bound[match.group(1).upper()]}")
    return ",".join(out)


class BrokerHandle(ABC):
    """One broker a test started: its address, its life cycle, and (in process) faults."""

    def __init__(self, properties: Mapping[str, str], *, name: str) -> None:
        self.properties = dict(properties)
        self.name = name
        self.log_dir = Path(self.properties["log.dirs"].split(",")[0])
        self.host = "127.0.0.1"
        self.port = 0
        self.broker_id = -1
        self.endpoints: dict[str, str] = {}  # listener name -> "host:port"

    @property
    def bootstrap(self) -> str:
        """``host:port`` for clients' ``bootstrap_servers``."""
        return f"{self.host}:{self.port}"

    @property
    def bootstrap_servers(self) -> str:
        return self.bootstrap

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<{type(self).__name__} {self.name} {self.bootstrap} {state}>"

    # -- life cycle --------------------------------------------------------------------

    @property
    @abstractmethod
    def running(self) -> bool: ...

    @abstractmethod
    def start(self, timeout_s: float = START_TIMEOUT_S) -> BrokerHandle:
        """Start (again, on the same port and log dir); returns once it serves requests."""

    @abstractmethod
    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """Ordered shutdown (Kafka's controlled stop: logs flushed, clean-shutdown marker);
        raises BrokerError unless it ended cleanly."""

    @abstractmethod
    def kill(self) -> None:
        """End it at once, as ``kill -9`` would: no flush, no checkpoints; the next start
        recovers the logs. Connections are reset."""

    @abstractmethod
    def pause(self) -> None:
        """Freeze it: it accepts TCP connections (the kernel does) but answers nothing and
        runs no timer until ``resume()``, like SIGSTOP."""

    @abstractmethod
    def resume(self) -> None: ...

    def restart(self, *, kill: bool = False, timeout_s: float = START_TIMEOUT_S) -> BrokerHandle:
        """Stop (``kill=True``: kill) and start again on the same port and log dir."""
        if self.running:
            if kill:
                self.kill()
            else:
                self.stop()
        return self.start(timeout_s)

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """``with broker.paused(): ...``: paused inside the block, resumed after it."""
        self.pause()
        try:
            yield
        finally:
            self.resume()

    @property
    def faults(self) -> Faults:
        """Request faults (``pytest_minikafka.faults.Faults``): in-process brokers started
        with ``faults=True`` only."""
        raise BrokerError(f"{self.name}: request faults need an in-process broker started "
                          "with faults=True (@pytest.mark.minikafka(faults=True))")

    # -- topics ------------------------------------------------------------------------

    def create_topics(self, topics: TopicsSpec, *, timeout_ms: int = 30_000) -> None:
        """Create topics: names (the broker's ``num.partitions``), ``{name: partitions}`` or
        ``{name: {"partitions": n, "replication_factor": r, "config": {...}}}``."""
        create_topics(self.bootstrap, topics, timeout_ms=timeout_ms)
