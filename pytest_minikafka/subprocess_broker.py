"""A broker in a child process (``python -m cli broker``), for tests that want the broker
outside their interpreter: its own GIL, a real ``kill -9``, a SIGSTOP that freezes every
thread (a ZooKeeper session included).

It waits for the ready line on stdout (``minikafka: started broker N listening on ...``)
without polling; the broker's log (stderr) goes to ``<log dir>/../<name>.log``
(``log_text()``). ``stop()`` is SIGTERM and a bounded wait for exit code 0; ``kill()`` is
SIGKILL; ``pause()``/``resume()`` are SIGSTOP/SIGCONT. Request faults (``faults``) need an
in-process broker: nothing reaches a broker's fault hooks from outside its process.
"""

from __future__ import annotations

import os
import re
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import IO

from pytest_minikafka.handle import (
    START_TIMEOUT_S,
    STOP_TIMEOUT_S,
    BrokerError,
    BrokerHandle,
    pinned_listeners,
)

__all__ = ["ReadyLine", "SubprocessBroker", "broker_command", "read_ready_line"]

_READY = re.compile(r"minikafka: started broker (\d+) listening on (\S+)")


def broker_command(properties: Mapping[str, str]) -> list[str]:
    """The command line of a broker process with these properties (``--override k=v``)."""
    cmd = [sys.executable, "-m", "cli", "broker"]
    for key, value in properties.items():
        cmd += ["--override", f"{key}={value}"]
    return cmd


@dataclass(frozen=True, slots=True)
class ReadyLine:
    """What a broker's ready line says: its id and its endpoints, listener name ->
    ``host:port``, in the order of ``listeners``."""

    broker_id: int
    endpoints: dict[str, str]


def read_ready_line(fd: int, timeout_s: float) -> ReadyLine | None:
    """Read a starting broker's stdout (the pipe's descriptor ``fd``) up to its ready line;
    None if the pipe closes first (the process exited); TimeoutError after ``timeout_s``.
    Raw reads of the pipe: a buffered readline() could take the ready line along with an
    earlier one (the metrics line) and leave select() waiting for bytes already read."""
    deadline = time.monotonic() + timeout_s
    pending = b""
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no ready line in {timeout_s} s")
            if not sel.select(remaining):
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                match = _READY.search(line.decode(errors="replace"))
                if match is not None:
                    return ReadyLine(int(match.group(1)), {
                        e.split("://", 1)[0]: e.split("://", 1)[1]
                        for e in match.group(2).split(",")})


class SubprocessBroker(BrokerHandle):
    def __init__(self, properties: Mapping[str, str], *, name: str = "broker",
                 env: Mapping[str, str] | None = None) -> None:
        super().__init__(properties, name=name)
        self.log_path = self.log_dir.parent / f"{name}.log"
        self.env = dict(env or {})
        self.proc: subprocess.Popen[bytes] | None = None
        self.exit_codes: list[int] = []
        self._log: IO[bytes] | None = None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int:
        if self.proc is None:
            raise BrokerError(f"{self.name} was never started")
        return self.proc.pid

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def command(self) -> list[str]:
        return broker_command(self.properties)

    def start(self, timeout_s: float = START_TIMEOUT_S) -> SubprocessBroker:
        if self.running:
            raise BrokerError(f"{self.name} is already running")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed when the process ends
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **self.env}
        # cwd: the broker's own directory, so that no module of the test's project can
        # shadow the broker's packages (``python -m`` puts the cwd first on sys.path).
        self.proc = subprocess.Popen(self.command(), stdout=subprocess.PIPE, stderr=self._log,
                                     stdin=subprocess.DEVNULL, env=env, cwd=self.log_path.parent)
        ready = self._read_ready_line(timeout_s)
        self.broker_id = ready.broker_id
        self.endpoints = ready.endpoints
        self.host, port = next(iter(self.endpoints.values())).rsplit(":", 1)
        self.port = int(port)
        bound = {name: int(hp.rsplit(":", 1)[1]) for name, hp in self.endpoints.items()}
        self.properties["listeners"] = pinned_listeners(self.properties["listeners"], bound)
        return self

    def _read_ready_line(self, timeout_s: float) -> ReadyLine:
        assert self.proc is not None and self.proc.stdout is not None
        try:
            ready = read_ready_line(self.proc.stdout.fileno(), timeout_s)
        except TimeoutError:
            self._end(signal.SIGKILL)
            raise BrokerError(f"{self.name} not ready after {timeout_s:.0f} s:\n"
                              f"{self.log_text()}") from None
        if ready is None:
            code = self._wait(STOP_TIMEOUT_S)
            raise BrokerError(f"{self.name} exited with {code} before it was ready:\n"
                              f"{self.log_text()}")
        return ready

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        if not self.running:
            return
        self.resume()
        code = self._end(signal.SIGTERM, timeout_s)
        if code != 0:
            raise BrokerError(f"{self.name} exited with {code} on SIGTERM:\n{self.log_text()}")

    def kill(self) -> None:
        if self.running:
            self._end(signal.SIGKILL)

    def pause(self) -> None:
        if not self.running:
            raise BrokerError(f"{self.name} is not running")
        self.pid_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.running:
            self.pid_signal(signal.SIGCONT)

    def pid_signal(self, signum: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(signum)

    def _end(self, signum: int, timeout_s: float = STOP_TIMEOUT_S) -> int:
        assert self.proc is not None
        self.proc.send_signal(signum)
        if signum == signal.SIGKILL:
            return self._wait(timeout_s)
        try:
            return self._wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self._wait(STOP_TIMEOUT_S)
            raise BrokerError(f"{self.name} did not exit within {timeout_s:.0f} s of "
                              f"{signal.Signals(signum).name}; killed") from None

    def _wait(self, timeout_s: float) -> int:
        assert self.proc is not None
        code = self.proc.wait(timeout=timeout_s)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        if self._log is not None:
            self._log.close()
            self._log = None
        self.exit_codes.append(code)
        return code
