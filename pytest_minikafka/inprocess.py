"""A broker inside the test process, on an event loop (uvloop) in a thread of its own.

Several run side by side (each its own thread, loop, log dir and port; nothing in the
broker is process-global). The broker's modules are imported on the first ``start()``, not
when this module is.

- ``stop()``: the broker's ordered shutdown (``BrokerServer.request_stop``), waited for;
- ``kill()``: its main task is cancelled: listeners and connections close at once, the logs
  are dropped without flush or checkpoint (``LogManager.abandon``), no clean-shutdown
  marker; the next start recovers, as after ``kill -9`` (what was written stays in the
  page cache, as it would);
- ``pause()``: a callback blocks the broker's loop until ``resume()`` (at most
  ``PAUSE_MAX_S``): nothing is answered, no timer runs; connections still queue in the
  kernel. Threads outside the loop (a ZooKeeper session's, the log cleaner's) keep running:
  to pause those too, run the broker in a subprocess (SIGSTOP);
- ``faults`` (with ``faults=True``): ``pytest_minikafka.faults.Faults`` over the broker's
  ``broker.faults.FaultInjector``, which lives as long as this handle (restarts keep it).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pytest_minikafka.handle import (
    START_TIMEOUT_S,
    STOP_TIMEOUT_S,
    BrokerError,
    BrokerHandle,
    pinned_listeners,
)

if TYPE_CHECKING:
    from broker.faults import FaultInjector
    from broker.server import BrokerServer
    from pytest_minikafka.faults import Faults

__all__ = ["PAUSE_MAX_S", "InProcessBroker"]

log = logging.getLogger(__name__)

PAUSE_MAX_S = 600.0


class InProcessBroker(BrokerHandle):
    def __init__(self, properties: Mapping[str, str], *, faults: bool = False,
                 name: str = "broker") -> None:
        super().__init__(properties, name=name)
        self.cluster_id = ""
        self._faults_enabled = faults
        self._injector: FaultInjector | None = None
        self._facade: Faults | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: BrokerServer | None = None
        self._task: asyncio.Task[int] | None = None
        self._outcome: BaseException | int | None = None  # how the last run ended
        self._gate: threading.Event | None = None  # set to resume a paused broker
        self._ready = False  # the last start got as far as serving requests
        self.starts = 0

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def faults(self) -> Faults:
        if self._facade is None:
            return super().faults
        return self._facade

    # -- start -------------------------------------------------------------------------

    def start(self, timeout_s: float = START_TIMEOUT_S) -> InProcessBroker:
        if self.running:
            raise BrokerError(f"{self.name} is already running")
        from broker.config import BrokerConfig

        config = BrokerConfig.from_properties(self.properties)  # ConfigError names the property
        if self._faults_enabled and self._injector is None:
            from broker.faults import FaultInjector
            from pytest_minikafka.faults import Faults

            self._injector = FaultInjector()
            self._facade = Faults(self._injector, self._close_connections)
        started = threading.Event()
        self._outcome = None
        self._ready = False
        self._thread = threading.Thread(target=self._run, args=(config, started),
                                        name=f"minikafka-{self.name}", daemon=True)
        self._thread.start()
        if not started.wait(timeout_s):
            self.kill()
            raise BrokerError(f"{self.name} did not start within {timeout_s:.0f} s")
        if not self._ready or self._server is None or self._server.broker is None:
            self._thread.join(STOP_TIMEOUT_S)
            raise BrokerError(f"{self.name} failed to start: {self._describe_outcome()}") \
                from (self._outcome if isinstance(self._outcome, BaseException) else None)
        broker = self._server.broker
        self.broker_id = broker.broker_id
        self.cluster_id = broker.cluster_id
        self.endpoints = {e.listener_name: f"{e.host}:{e.port}"
                          for e in broker.advertised_listeners}
        first = broker.advertised_listeners[0]
        self.host, self.port = first.host, first.port
        # Later starts bind the same ports (clients keep their bootstrap address).
        bound = {e.listener_name: e.port for e in self._server.network.bound_endpoints}
        self.properties["listeners"] = pinned_listeners(self.properties["listeners"], bound)
        self.starts += 1
        return self

    def _run(self, config: Any, started: threading.Event) -> None:
        import uvloop

        try:
            uvloop.run(self._main(config, started))
        except BaseException as exc:  # recorded: stop() and start() report it
            self._outcome = exc
        finally:
            started.set()

    async def _main(self, config: Any, started: threading.Event) -> None:
        from broker.server import BrokerServer

        self._loop = asyncio.get_running_loop()
        self._server = BrokerServer(config, install_signal_handlers=False, faults=self._injector)
        self._task = asyncio.create_task(self._server.run(), name=f"{self.name}-run")
        ready = asyncio.create_task(self._server.wait_started())
        await asyncio.wait({self._task, ready}, return_when=asyncio.FIRST_COMPLETED)
        self._ready = ready.done() and not self._task.done()
        if not ready.done():
            ready.cancel()  # run() ended before the broker was ready: start-up failed
        started.set()
        try:
            self._outcome = await self._task
        except asyncio.CancelledError as exc:
            self._outcome = exc  # kill()

    # -- stop --------------------------------------------------------------------------

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        if not self.running:
            return
        self.resume()
        server = self._server
        assert self._loop is not None and server is not None
        self._loop.call_soon_threadsafe(server.request_stop)
        self._join(timeout_s)
        if self._outcome != 0:
            raise BrokerError(f"{self.name} did not shut down cleanly: {self._describe_outcome()}")

    def kill(self) -> None:
        if not self.running:
            return
        self.resume()
        task, loop = self._task, self._loop
        assert task is not None and loop is not None
        loop.call_soon_threadsafe(task.cancel)
        self._join(STOP_TIMEOUT_S)

    def _join(self, timeout_s: float) -> None:
        assert self._thread is not None
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            raise BrokerError(f"{self.name}: its thread did not end within {timeout_s:.0f} s")

    def _describe_outcome(self) -> str:
        outcome = self._outcome
        if isinstance(outcome, asyncio.CancelledError):
            return "killed"
        if isinstance(outcome, BaseException):
            return f"{type(outcome).__name__}: {outcome}"
        return f"exit code {outcome}"

    # -- pause -------------------------------------------------------------------------

    def pause(self) -> None:
        if not self.running:
            raise BrokerError(f"{self.name} is not running")
        if self._gate is not None:
            return
        gate, entered = threading.Event(), threading.Event()
        name = self.name

        def block() -> None:
            entered.set()
            if not gate.wait(PAUSE_MAX_S):
                log.warning("%s: paused for %.0f s without resume(): resuming", name, PAUSE_MAX_S)

        assert self._loop is not None
        self._gate = gate
        self._loop.call_soon_threadsafe(block)
        if not entered.wait(STOP_TIMEOUT_S):
            gate.set()
            self._gate = None
            raise BrokerError(f"{self.name}: its event loop did not take the pause")

    def resume(self) -> None:
        gate, self._gate = self._gate, None
        if gate is not None:
            gate.set()

    # -- faults ------------------------------------------------------------------------

    def _close_connections(self) -> int:
        """Close every client connection now (on the broker's loop); how many."""
        if not self.running or self._server is None or self._loop is None:
            raise BrokerError(f"{self.name} is not running")
        network = self._server.network

        async def close() -> int:
            return network.close_connections()

        return asyncio.run_coroutine_threadsafe(close(), self._loop).result(STOP_TIMEOUT_S)
