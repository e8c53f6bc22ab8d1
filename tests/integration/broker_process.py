"""A real ``minikafka broker`` subprocess for integration tests.

``BrokerProcess(tmp_dir, overrides).start()`` runs ``python -m cli broker`` on
127.0.0.1 with an ephemeral port (``listeners=PLAINTEXT://127.0.0.1:0``) and a log dir
under ``tmp_dir``; it waits for the broker's ready line on stdout (no polling), which
names the bound port, so ``.bootstrap`` is "127.0.0.1:PORT". Stderr goes to a file in
``tmp_dir`` (``.stderr_text()``); the fixtures print it when a test fails.

``stop()`` sends SIGTERM and waits (bounded) for exit code 0; ``restart()`` stops and starts
again on the same log dir (a new port unless ``same_port``); ``kill9_and_restart()``
kills with SIGKILL first. Every wait is bounded.

Health: every started broker is listed in ``BrokerProcess.started``; after each test the
hooks in ``tests/conftest.py`` take what it logged since the last look (``take_problems``:
ERROR lines, tracebacks) and how it exited (exit code and why: SIGTERM from the harness or
the test, SIGKILL by the test, exit during start-up), and fail the test on anything the
test did not declare (``tests/broker_checks.py``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import IO, ClassVar

from pytest_minikafka.subprocess_broker import ReadyLine, broker_command, read_ready_line
from tests.broker_checks import Expectations, unexpected_entries

REPO_ROOT = Path(__file__).resolve().parents[2]
# Bounds on a hang, not measurements: under load ~50 on this 2-core machine a broker took
# 21-24 s to print its ready line (and some wrote no log line at all within 30 s).
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 40.0


class BrokerStartError(RuntimeError):
    pass


@dataclass(frozen=True)
class Exit:
    """One end of a broker process: its exit code and what ended it."""

    code: int
    # "exited" (after the test's own signal, or by itself), "stopped with SIGTERM",
    # "SIGKILL by the test", "start-up", "killed: not ready in time",
    # "killed: no exit after SIGTERM"
    cause: str

    def acceptable(self, expected: Expectations) -> bool:
        if self.code == 0 or self.code in expected.exit_codes:
            return True
        return self.cause == "SIGKILL by the test" and self.code == -signal.SIGKILL


class BrokerProcess:
    # Every broker started in this test session, until it has exited and been checked.
    started: ClassVar[list[BrokerProcess]] = []

    def __init__(self, tmp_dir: Path, overrides: dict[str, str] | None = None, *,
                 env: dict[str, str] | None = None, name: str = "broker") -> None:
        self.tmp_dir = Path(tmp_dir)
        self.name = name
        self.log_dir = self.tmp_dir / f"{name}-data"
        self.stderr_path = self.tmp_dir / f"{name}-stderr.log"
        self.overrides: dict[str, str] = {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(self.log_dir),
            **(overrides or {}),
        }
        self.env = env or {}
        self.proc: subprocess.Popen[str] | None = None
        self.host = "127.0.0.1"
        self.port = 0
        self.broker_id = -1
        self.endpoints: dict[str, str] = {}  # listener name -> "host:port", from the ready line
        self.exit_codes: list[int] = []
        self.exits: list[Exit] = []
        self._stderr: IO[bytes] | None = None
        self._reaped = True  # no process yet
        self._exits_checked = 0
        self._log_checked_bytes = 0

    # -- addresses ---------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def command(self) -> list[str]:
        return broker_command(self.overrides)

    # -- life cycle --------------------------------------------------------------------

    def start(self, timeout_s: float = START_TIMEOUT_S) -> BrokerProcess:
        return self.launch().wait_ready(timeout_s)

    def launch(self) -> BrokerProcess:
        """Start the process without waiting for it to be ready (``wait_ready``): several
        brokers start at once."""
        if self.proc is not None and self.proc.poll() is None:
            raise BrokerStartError("already running")
        self.tmp_dir.mkdir(parents=True, exist_ok=True)
        self._stderr = open(self.stderr_path, "ab")  # noqa: SIM115 - closed in _reap
        if self not in BrokerProcess.started:
            BrokerProcess.started.append(self)
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **self.env}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
        self._reaped = False
        self.proc = subprocess.Popen(self.command(), cwd=REPO_ROOT, stdout=subprocess.PIPE,
                                     stderr=self._stderr, stdin=subprocess.DEVNULL, env=env,
                                     text=True)
        return self

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S) -> BrokerProcess:
        """Wait for the ready line of the process ``launch`` started; learn its address."""
        ready = self._read_ready_line(timeout_s)
        self.broker_id = ready.broker_id
        self.endpoints = ready.endpoints
        self.host, port = next(iter(self.endpoints.values())).rsplit(":", 1)
        self.port = int(port)
        return self

    def _read_ready_line(self, timeout_s: float) -> ReadyLine:
        assert self.proc is not None and self.proc.stdout is not None
        try:
            ready = read_ready_line(self.proc.stdout.fileno(), timeout_s)
        except TimeoutError:
            self._kill("killed: not ready in time")
            raise BrokerStartError(f"broker not ready after {timeout_s} s\n"
                                   f"{self.stderr_text()}") from None
        if ready is None:  # EOF: the process exited
            code = self.proc.wait(timeout=STOP_TIMEOUT_S)
            self._reap(code, "start-up")
            raise BrokerStartError(f"broker exited with {code} before it was ready\n"
                                   f"{self.stderr_text()}")
        return ready

    def signal(self, signum: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(signum)

    def wait(self, timeout_s: float = STOP_TIMEOUT_S, *, cause: str = "exited") -> int:
        assert self.proc is not None
        code = self.proc.wait(timeout=timeout_s)
        self._reap(code, cause)
        return code

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM, wait for exit; returns the exit code (0 after an ordered shutdown)."""
        if self.proc is None:
            return 0
        if self.proc.poll() is not None:  # exited before the SIGTERM (a crash?)
            self._reap(self.proc.returncode, "exited")
            return self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.wait(timeout_s, cause="stopped with SIGTERM")
        except subprocess.TimeoutExpired:
            self._kill("killed: no exit after SIGTERM")
            raise

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.wait(cause="SIGKILL by the test")

    def restart(self, *, same_port: bool = False) -> BrokerProcess:
        code = self.stop()
        if code != 0:
            raise BrokerStartError(f"broker exited with {code} on SIGTERM\n{self.stderr_text()}")
        return self._start_again(same_port)

    def kill9_and_restart(self, *, same_port: bool = False) -> BrokerProcess:
        self.kill9()
        return self._start_again(same_port)

    def _start_again(self, same_port: bool) -> BrokerProcess:
        if same_port and self.port:
            self.overrides["listeners"] = f"PLAINTEXT://127.0.0.1:{self.port}"
        return self.start()

    def _kill(self, cause: str) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=STOP_TIMEOUT_S)
        if self.proc is not None:
            self._reap(self.proc.returncode, cause)

    def _reap(self, code: int, cause: str) -> None:
        if self._reaped:
            return
        self._reaped = True
        self.exit_codes.append(code)
        self.exits.append(Exit(code, cause))
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stderr_text(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    # -- health (checked after every test by tests/conftest.py) ------------------------

    def take_problems(self, expected: Expectations) -> list[str]:
        """What went wrong since the last call and the test did not declare: ERROR or
        traceback entries in the log, exits with a code other than 0 (SIGKILL by the test
        excepted). Looks at each log byte and each exit once."""
        problems: list[str] = []
        if self.proc is not None and self.proc.poll() is not None:
            self._reap(self.proc.returncode, "exited")  # ended by itself while no one waited
        new_exits = self.exits[self._exits_checked:]
        self._exits_checked = len(self.exits)
        for end in new_exits:
            if not end.acceptable(expected):
                problems.append(f"{self.name} (pid {self.proc.pid if self.proc else '?'}) exited "
                                f"with {end.code} ({end.cause})")
        for entry in unexpected_entries(self._take_log(), expected):
            problems.append(f"{self.name} logged ({self.stderr_path}):\n{entry}")
        return problems

    def _take_log(self) -> str:
        """Complete lines of the log written since the last call."""
        try:
            with open(self.stderr_path, "rb") as f:
                f.seek(self._log_checked_bytes)
                data = f.read()
        except FileNotFoundError:
            return ""
        if self.is_running():
            data = data[:data.rfind(b"\n") + 1]  # a line being written is read next time
        self._log_checked_bytes += len(data)
        return data.decode(errors="replace")

    def rss_kib(self) -> int:
        """Resident set size from /proc/<pid>/status (VmRSS, KiB)."""
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise RuntimeError("no VmRSS")

    def __enter__(self) -> BrokerProcess:
        return self.start() if not self.is_running() else self

    def __exit__(self, *exc: object) -> None:
        if self.is_running():
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.stop()


def register_topic(log_dir: Path, name: str, partitions: int = 1, broker_id: int = 0) -> None:
    """Write ``name`` into a (stopped) broker's topic store, as if it had been created:
    the controller elects its leaders when the broker starts."""
    import asyncio
    import uuid

    from controller.local_store import LocalTopicStore
    from controller.topic_store import TopicRecord

    log_dir.mkdir(parents=True, exist_ok=True)
    store = LocalTopicStore.load(log_dir, broker_id)
    record = TopicRecord(name, uuid.uuid4(), dict.fromkeys(range(partitions), (broker_id,)))
    asyncio.run(store.create_topic(record, {}))

