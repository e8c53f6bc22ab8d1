"""Apache Kafka 3.9.1 brokers in ZooKeeper mode, the reference the cluster is checked against.

``ApacheKafkaZk(work_dir, broker_id=1, zookeeper_connect="127.0.0.1:P/chroot").start()`` runs
``java -cp '<libs>/*' kafka.Kafka server.properties`` from the jars ``tools/fetch-kafka-jars``
brings, listening on a free port of 127.0.0.1, and waits (bounded) for its
``[KafkaServer id=N] started`` log line. ``kafka_tool(...)`` runs one of Kafka's command-line
classes (``org.apache.kafka.tools.TopicCommand``, ``kafka.admin.ConfigCommand``, ...).
``log_levels={"kafka.controller": "DEBUG"}`` raises a logger's level in ``server.log``.
``host``/``port`` put the listener elsewhere (an address of the broker's own network
namespace, entered through ``wrapper=["ip", "netns", "exec", NS]``); ``pause()``/``resume()``
stop and continue the JVM (SIGSTOP/SIGCONT) for fault injection.

Layout of ``work_dir``: ``server.properties``, ``log4j.properties``, ``server.log`` (the
broker's log), ``stdout.log``, ``data/`` (``log.dirs``).

A broker killed with SIGKILL leaves ``/brokers/ids/<id>`` until its ZooKeeper session
expires (``zookeeper.session.timeout.ms``); restarting it sooner fails start-up, as in Kafka.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from devcluster.zookeeper import free_ports, kafka_libs

START_TIMEOUT_S: Final = 120.0
STOP_TIMEOUT_S: Final = 60.0
TOOL_TIMEOUT_S: Final = 120.0
POLL_INTERVAL_S: Final = 0.1

JVM_FLAGS: Final[tuple[str, ...]] = (
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-Djava.awt.headless=true",
)
TOOL_JVM_FLAGS: Final[tuple[str, ...]] = ("-Xmx256m", "-XX:TieredStopAtLevel=1",
                                          "-XX:+UseSerialGC")

LOG4J: Final = """\
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File={log_file}
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
"""

TOOL_LOG4J: Final = "log4j.rootLogger=WARN, stderr\n" \
    "log4j.appender.stderr=org.apache.log4j.ConsoleAppender\n" \
    "log4j.appender.stderr.Target=System.err\n" \
    "log4j.appender.stderr.layout=org.apache.log4j.PatternLayout\n" \
    "log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n\n"


class ApacheKafkaError(RuntimeError):
    """A Kafka broker or tool failed; the message carries its output's tail."""


class ApacheKafkaZk:
    """One Apache Kafka broker in ZooKeeper mode."""

    def __init__(self, work_dir: Path, *, broker_id: int, zookeeper_connect: str,
                 properties: Mapping[str, str] | None = None, heap: str = "384m",
                 log_levels: Mapping[str, str] | None = None,
                 classpath: Path | None = None, host: str = "127.0.0.1",
                 port: int | None = None, wrapper: Sequence[str] = ()) -> None:
        self.work_dir = Path(work_dir)
        self.broker_id = broker_id
        self.zookeeper_connect = zookeeper_connect
        self.heap = heap
        self.libs = kafka_libs(classpath)
        self.host = host
        self.port = port if port is not None else free_ports(1)[0]
        self.wrapper = list(wrapper)
        self.extra = dict(properties or {})
        self.log_levels = dict(log_levels or {})
        self.log_path = self.work_dir / "server.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        if self.proc is None:
            raise ApacheKafkaError("Kafka was never started")
        return self.proc.pid

    def properties(self) -> dict[str, str]:
        return {
            "broker.id": str(self.broker_id),
            "listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "log.dirs": str(self.work_dir / "data"),
            "zookeeper.connect": self.zookeeper_connect,
            "offsets.topic.replication.factor": "1",
            "group.initial.rebalance.delay.ms": "0",
            **self.extra,
        }

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, limit: int = 6000) -> str:
        parts = []
        for path in (self.work_dir / "stdout.log", self.log_path):
            with contextlib.suppress(OSError):
                parts.append(f"--- {path} ---\n"
                             + path.read_bytes()[-limit:].decode("utf-8", "replace"))
        return "\n".join(parts)

    def log_size(self) -> int:
        """Bytes in ``server.log`` now: a mark for ``wait_for_log(..., since=)``."""
        try:
            return self.log_path.stat().st_size
        except FileNotFoundError:
            return 0

    def wait_for_log(self, text: str, *, since: int = 0, timeout_s: float = 30.0) -> str:
        """Wait until a line of ``server.log`` after byte ``since`` contains ``text``, while
        the broker runs; ApacheKafkaError on timeout or exit."""
        deadline = time.monotonic() + timeout_s
        needle = text.encode()
        while True:
            with contextlib.suppress(OSError), open(self.log_path, "rb") as log:
                log.seek(since)
                for line in log.read().splitlines():
                    if needle in line:
                        return line.decode("utf-8", "replace")
            if not self.running():
                raise ApacheKafkaError(f"Kafka is not running (waiting for {text!r}):\n"
                                       f"{self.log_tail()}")
            if time.monotonic() > deadline:
                raise ApacheKafkaError(f"no log line with {text!r} after {timeout_s:.0f} s:\n"
                                       f"{self.log_tail()}")
            time.sleep(POLL_INTERVAL_S)

    def start(self, timeout_s: float = START_TIMEOUT_S) -> ApacheKafkaZk:
        if self.running():
            raise ApacheKafkaError("Kafka is already running")
        self.work_dir.mkdir(parents=True, exist_ok=True)
        config = self.work_dir / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        log4j = self.work_dir / "log4j.properties"
        log4j.write_text(LOG4J.format(log_file=self.log_path) + "".join(
            f"log4j.logger.{name}={level}\n" for name, level in self.log_levels.items()))
        offset = self.log_size()
        argv = [*self.wrapper, "java", f"-Xmx{self.heap}", "-Xms64m", *JVM_FLAGS,
                f"-Dlog4j.configuration=file:{log4j}", f"-Dkafka.logs.dir={self.work_dir}",
                "-cp", f"{self.libs}/*", "kafka.Kafka", str(config)]
        setpriv = shutil.which("setpriv")
        if setpriv is not None:
            argv = [setpriv, "--pdeathsig", "KILL", "--", *argv]
        with open(self.work_dir / "stdout.log", "ab") as out:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        try:
            self.wait_for_log(f"[KafkaServer id={self.broker_id}] started", since=offset,
                              timeout_s=timeout_s)
        except ApacheKafkaError:
            self.kill()
            raise ApacheKafkaError(f"Kafka did not start within {timeout_s:.0f} s (exit code "
                                   f"{self.proc.returncode}):\n{self.log_tail()}") from None
        return self

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM (Kafka's controlled shutdown), SIGKILL after ``timeout_s``."""
        if not self.running():
            return
        assert self.proc is not None
        self._signal(signal.SIGTERM)
        self._signal(signal.SIGCONT)
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()

    def pause(self) -> None:
        """SIGSTOP: the JVM stays but answers nothing (a hung broker)."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(timeout=STOP_TIMEOUT_S)

    def _signal(self, sig: int) -> None:
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, sig)


def kafka_tool(main_class: str, *args: str, classpath: Path | None = None,
               timeout_s: float = TOOL_TIMEOUT_S, check: bool = True,
               work_dir: Path | None = None,
               input_text: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run one of Kafka's command-line classes; ApacheKafkaError on a non-zero exit."""
    libs = kafka_libs(classpath)
    log4j_flag: list[str] = []
    if work_dir is not None:
        work_dir.mkdir(parents=True, exist_ok=True)
        log4j = work_dir / "tools-log4j.properties"
        log4j.write_text(TOOL_LOG4J)
        log4j_flag = [f"-Dlog4j.configuration=file:{log4j}"]
    argv = ["java", *TOOL_JVM_FLAGS, *log4j_flag, "-cp", f"{libs}/*", main_class, *args]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False,
                            input=input_text if input_text is not None else "")
    if check and result.returncode != 0:
        raise ApacheKafkaError(f"{main_class} {' '.join(args)} exited with "
                               f"{result.returncode}:\n{result.stdout}\n{result.stderr}")
    return result
