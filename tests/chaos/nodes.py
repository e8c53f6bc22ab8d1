"""Broker processes the harness starts, hits and restarts: minikafka or Apache Kafka 3.9.1.

Both kinds have the same face (``BrokerNode``): a broker id, an address (its own network
namespace's, or 127.0.0.1), a log dir on a tmpfs of its own (so that one broker's disk can
be filled), a log file, and the signals of the faults: ``kill()`` (SIGKILL), ``pause()`` /
``resume()`` (SIGSTOP/SIGCONT), ``stop()`` (SIGTERM: Kafka's and minikafka's controlled
shutdown, SIGKILL after a bound), ``start()`` (same id, address and data; waits, bounded,
for the broker's ready line).

- minikafka: ``python -m cli broker --override ...``; stdout and stderr to ``broker.log``;
  ready on ``minikafka: started broker N listening on ...``. ``source_root`` runs the broker
  of another checkout (its directory first on ``PYTHONPATH``), to put another branch under
  the same harness.
- Apache Kafka: ``devcluster.apache_kafka.ApacheKafkaZk`` (its ``server.log``); ready on
  ``[KafkaServer id=N] started``.

Every process runs in its own process group and dies with the harness (``setpriv
--pdeathsig KILL``). Log lines of both brokers read ``[yyyy-mm-dd hh:mm:ss,mmm] LEVEL ...``.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final, Protocol

from devcluster.apache_kafka import ApacheKafkaError, ApacheKafkaZk

REPO_ROOT: Final = Path(__file__).resolve().parents[2]
START_TIMEOUT_S: Final = 120.0
STOP_TIMEOUT_S: Final = 60.0
POLL_INTERVAL_S: Final = 0.1
_READY = re.compile(rb"minikafka: started broker (\d+) listening on (\S+)")


class NodeError(RuntimeError):
    """A broker did not start or stop as asked; the message carries its log's tail."""


class Tmpfs:
    """A tmpfs of ``size_mib`` mounted on ``path`` (a disk of its own to fill)."""

    def __init__(self, path: Path, size_mib: int) -> None:
        self.path = path
        self.size_mib = size_mib
        self.mounted = False

    def mount(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={self.size_mib}m", "tmpfs",
                        str(self.path)], check=True, capture_output=True, timeout=20)
        self.mounted = True

    def unmount(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.path)], check=False, capture_output=True,
                           timeout=20)
            self.mounted = False


def _tail(path: Path, limit: int = 4000) -> str:
    try:
        return path.read_bytes()[-limit:].decode("utf-8", "replace")
    except OSError:
        return ""


class BrokerNode(Protocol):
    broker_id: int
    host: str
    port: int
    data_dir: Path
    log_path: Path
    paused: bool

    @property
    def bootstrap(self) -> str: ...

    def running(self) -> bool: ...
    def start(self, timeout_s: float = START_TIMEOUT_S) -> None: ...
    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> int | None: ...
    def kill(self) -> None: ...
    def pause(self) -> None: ...
    def resume(self) -> None: ...
    def exit_code(self) -> int | None: ...


class MinikafkaNode:
    """One ``minikafka broker`` process (see the module docstring)."""

    def __init__(self, home: Path, *, broker_id: int, host: str, port: int,
                 properties: Mapping[str, str], wrapper: Sequence[str] = (),
                 env: Mapping[str, str] | None = None, source_root: Path = REPO_ROOT) -> None:
        self.home = home
        self.source_root = source_root
        self.broker_id = broker_id
        self.host = host
        self.port = port
        self.data_dir = home / "data"
        self.log_path = home / "broker.log"
        self.properties = dict(properties)
        self.wrapper = list(wrapper)
        self.env = dict(env or {})
        self.proc: subprocess.Popen[bytes] | None = None
        self.paused = False

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def command(self) -> list[str]:
        props = {
            "broker.id": str(self.broker_id),
            "listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "log.dirs": str(self.data_dir),
            **self.properties,
        }
        argv = [*self.wrapper, sys.executable, "-m", "cli", "broker"]
        for key, value in props.items():
            argv += ["--override", f"{key}={value}"]
        setpriv = shutil.which("setpriv")
        return [setpriv, "--pdeathsig", "KILL", "--", *argv] if setpriv else argv

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def exit_code(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def start(self, timeout_s: float = START_TIMEOUT_S) -> None:
        if self.running():
            raise NodeError(f"broker {self.broker_id} is already running")
        self.home.mkdir(parents=True, exist_ok=True)
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **self.env}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(self.source_root),
                                                          env.get("PYTHONPATH")]))
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=subprocess.STDOUT, env=env,
                                         cwd=self.source_root,
                                         start_new_session=True)
        self.paused = False
        deadline = time.monotonic() + timeout_s
        while True:
            with open(self.log_path, "rb") as log:
                log.seek(offset)
                if _READY.search(log.read()):
                    return
            if self.proc.poll() is not None:
                raise NodeError(f"minikafka broker {self.broker_id} exited with "
                                f"{self.proc.returncode} at start-up:\n{_tail(self.log_path)}")
            if time.monotonic() > deadline:
                self.kill()
                raise NodeError(f"minikafka broker {self.broker_id} not started after "
                                f"{timeout_s:.0f} s:\n{_tail(self.log_path)}")
            time.sleep(POLL_INTERVAL_S)

    def _signal(self, sig: int) -> None:
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, sig)

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM (and SIGCONT); SIGKILL after ``timeout_s``. The exit code."""
        if not self.running():
            return self.exit_code()
        assert self.proc is not None
        self._signal(signal.SIGTERM)
        self._signal(signal.SIGCONT)
        self.paused = False
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.exit_code()

    def kill(self) -> None:
        self._signal(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(timeout=30)
        self.paused = False

    def pause(self) -> None:
        self._signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        self._signal(signal.SIGCONT)
        self.paused = False


class KafkaNode:
    """One Apache Kafka 3.9.1 broker in ZooKeeper mode (``ApacheKafkaZk``)."""

    def __init__(self, home: Path, *, broker_id: int, host: str, port: int,
                 zookeeper_connect: str, properties: Mapping[str, str],
                 wrapper: Sequence[str] = ()) -> None:
        self.broker_id = broker_id
        self.host = host
        self.port = port
        self.kafka = ApacheKafkaZk(home, broker_id=broker_id, zookeeper_connect=zookeeper_connect,
                                   properties=properties, host=host, port=port, wrapper=wrapper,
                                   heap="512m")
        self.data_dir = home / "data"
        self.log_path = self.kafka.log_path
        self.paused = False

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def running(self) -> bool:
        return self.kafka.running()

    def exit_code(self) -> int | None:
        return None if self.kafka.proc is None else self.kafka.proc.poll()

    def start(self, timeout_s: float = START_TIMEOUT_S) -> None:
        try:
            self.kafka.start(timeout_s)
        except ApacheKafkaError as exc:
            raise NodeError(str(exc)) from None
        self.paused = False

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> int | None:
        self.kafka.stop(timeout_s)
        self.paused = False
        return self.exit_code()

    def kill(self) -> None:
        self.kafka.kill()
        self.paused = False

    def pause(self) -> None:
        self.kafka.pause()
        self.paused = True

    def resume(self) -> None:
        self.kafka.resume()
        self.paused = False
