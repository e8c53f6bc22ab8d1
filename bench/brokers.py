"""What the bench needs from a broker under test, and the settings both sides share.

``BrokerUnderTest`` is the small interface the runner drives: start, stop, bootstrap address,
the pid whose process tree is charged for CPU, and the log dir size. ``SHARED_SETTINGS`` holds
the server.properties both brokers get where a property means the same thing on both:

- ``log.segment.bytes`` 1 GiB (Kafka's default, written out so both sides use it);
- no fsync per message: ``log.flush.interval.messages`` / ``log.flush.interval.ms`` left at
  Kafka's defaults (Long.MAX_VALUE / unset), i.e. the page cache is flushed by the OS;
- ``num.network.threads`` 2 and ``num.io.threads`` 2 (2 cores on this machine; Kafka's
  defaults 3 and 8 are sized for bigger hosts).

Topics are created by the bench with CreateTopics (``bench.admin``) before each workload.
"""

from __future__ import annotations

import shutil
import subprocess
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Final

from bench.procs import stop as stop_process

SHARED_SETTINGS: Final[dict[str, str]] = {
    "log.segment.bytes": str(1 << 30),
    "num.network.threads": "2",
    "num.io.threads": "2",
}


class BrokerUnderTest(ABC):
    """One broker process (or process group) the bench starts, measures and stops."""

    name: str
    log_dir: Path

    @property
    @abstractmethod
    def bootstrap(self) -> str:
        """host:port for clients."""

    @property
    @abstractmethod
    def pid(self) -> int:
        """The broker's pid (its process tree is charged for CPU); 0 when not running."""

    @abstractmethod
    def launch(self) -> None:
        """Start the process and return at once (P6 measures the wait itself)."""

    @abstractmethod
    def wait_started(self) -> None:
        """Return once the broker answers Metadata; raise BenchError if it does not in time."""

    def start(self) -> None:
        """Start the process and return once it answers clients."""
        self.launch()
        self.wait_started()

    @abstractmethod
    def stop(self) -> float:
        """Stop cleanly (SIGTERM, then SIGKILL after a grace period); seconds taken."""

    @abstractmethod
    def version(self) -> str:
        """A short version string for the report header."""

    @abstractmethod
    def fresh(self, work_dir: Path) -> BrokerUnderTest:
        """A new, stopped broker of the same kind and settings with an empty log dir in
        work_dir (P7 starts one per partition count)."""

    def topic_log_bytes(self, topic: str) -> int:
        """Bytes of record data (the .log segment files) of every partition of topic."""
        return sum(p.stat().st_size for p in self.log_dir.glob(f"{topic}-*/*.log"))

    def wipe(self) -> None:
        """Delete the log dir (the broker must be stopped)."""
        shutil.rmtree(self.log_dir, ignore_errors=True)


class SubprocessBroker(BrokerUnderTest):
    """A broker run as one child process listening on 127.0.0.1:``port``: the address, pid
    and stop that Apache Kafka and minikafka share (each subclass launches its own)."""

    port: int
    _proc: subprocess.Popen[bytes] | None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else 0

    def stop(self) -> float:
        if self._proc is None:
            return 0.0
        taken = stop_process(self._proc, grace_s=60.0)
        self._proc = None
        return taken
