"""Apache Kafka 3.9.1, the reference broker, started by the bench in KRaft combined mode.

KRaft combined mode (one JVM that is both controller and broker) is the simplest single-broker
set-up: no ZooKeeper process to manage. Steps, as Kafka's own scripts do them:

1. write ``server.properties`` (``process.roles=broker,controller``, ``node.id=1``,
   ``controller.quorum.voters=1@127.0.0.1:<cport>``, PLAINTEXT and CONTROLLER listeners on
   127.0.0.1 with ephemeral ports, ``log.dirs``, replication factors 1,
   ``broker.session.timeout.ms`` of an hour (the bench pauses the JVM while another broker
   is measured: its controller must not fence it for that), plus
   ``brokers.SHARED_SETTINGS``) and a ``log4j.properties`` that logs to ``server.log``;
2. ``kafka.tools.StorageTool format -t <cluster id> -c server.properties`` (once per log dir);
3. ``java -Xmx1g -Xms1g <G1 flags as kafka-run-class.sh> -cp 'tools/kafka-jars/libs/*'
   kafka.Kafka server.properties``.

The jars come from ``tools/fetch-kafka-jars`` (Maven Central: kafka_2.13, kafka-tools 3.9.1).
"""

from __future__ import annotations

import base64
import subprocess
import uuid
from pathlib import Path
from typing import Final

from bench.admin import wait_ready
from bench.brokers import SHARED_SETTINGS, SubprocessBroker
from bench.procs import BenchError, free_port, spawn, wait_for_port

REPO_ROOT: Final[Path] = Path(__file__).resolve().parent.parent
KAFKA_LIBS: Final[Path] = REPO_ROOT / "tools" / "kafka-jars" / "libs"
KAFKA_VERSION: Final[str] = "3.9.1"
START_TIMEOUT_S: Final[float] = 120.0
BROKER_SESSION_TIMEOUT_MS: Final[int] = 3_600_000  # see _write_config

JVM_FLAGS: Final[tuple[str, ...]] = (
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
)

LOG4J_TEMPLATE: Final[str] = """\
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File={log_file}
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.state.change.logger=WARN
"""


def java_classpath() -> str:
    if not (KAFKA_LIBS / "kafka_2.13-3.9.1.jar").exists():
        raise BenchError(f"Kafka jars missing in {KAFKA_LIBS}: run tools/fetch-kafka-jars")
    return f"{KAFKA_LIBS}/*"


def java_version() -> str:
    out = subprocess.run(
        ["java", "-version"], capture_output=True, text=True, timeout=30, check=False
    )
    return (out.stderr.splitlines() or ["java ?"])[0].strip()


def _cluster_id() -> str:
    """A Kafka Uuid: 16 random bytes, URL-safe base64 without padding (22 characters)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class ApacheKafka(SubprocessBroker):
    """A single-node KRaft Apache Kafka in ``work_dir`` (config, logs and data)."""

    def __init__(self, work_dir: Path, *, heap: str = "1g",
                 settings: dict[str, str] | None = None) -> None:
        self.name = "Kafka"
        self.settings = dict(settings or {})
        self.work_dir = work_dir
        self.log_dir = work_dir / "data"
        self.heap = heap
        self.port = free_port()
        self.controller_port = free_port()
        self._proc: subprocess.Popen[bytes] | None = None
        self._formatted = False
        self._config = work_dir / "server.properties"
        self._log4j = work_dir / "log4j.properties"

    def version(self) -> str:
        return f"Apache Kafka {KAFKA_VERSION} (KRaft combined mode), {java_version()}"

    def fresh(self, work_dir: Path) -> ApacheKafka:
        return ApacheKafka(work_dir, heap=self.heap, settings=self.settings)

    def _write_config(self) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": (
                f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}"
            ),
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.log_dir),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "false",
            # The runner pauses this JVM (SIGSTOP) while minikafka is measured; with the
            # default 9 s its own controller fenced it on resuming (every partition's leader
            # epoch bumped, group coordinators reloaded at the start of its next run). A
            # liveness timeout only: nothing else on a single node depends on it.
            "broker.session.timeout.ms": str(BROKER_SESSION_TIMEOUT_MS),
            **SHARED_SETTINGS,
            **self.settings,
        }
        self._config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self._log4j.write_text(LOG4J_TEMPLATE.format(log_file=self.work_dir / "server.log"))

    def _java(self, main_class: str, *args: str, heap: str) -> list[str]:
        return [
            "java",
            f"-Xmx{heap}",
            f"-Xms{heap}" if main_class == "kafka.Kafka" else "-Xms64m",
            *JVM_FLAGS,
            f"-Dlog4j.configuration=file:{self._log4j}",
            f"-Dkafka.logs.dir={self.work_dir}",
            "-cp",
            java_classpath(),
            main_class,
            *args,
        ]

    def _format(self) -> None:
        self._write_config()
        argv = self._java(
            "kafka.tools.StorageTool",
            "format",
            f"--cluster-id={_cluster_id()}",  # may start with "-": keep it attached
            f"--config={self._config}",
            heap="256m",
        )
        out = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
        if out.returncode != 0:
            raise BenchError(f"kafka-storage format failed: {out.stdout}{out.stderr}")
        self._formatted = True

    def launch(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            raise BenchError("Kafka already running")
        if not self._formatted:
            self._format()
        self._proc = spawn(
            self._java("kafka.Kafka", str(self._config), heap=self.heap),
            log_path=self.work_dir / "stdout.log",
        )

    def wait_started(self) -> None:
        if self._proc is None:
            raise BenchError("Kafka not launched")
        wait_for_port(self.port, proc=self._proc, timeout_s=START_TIMEOUT_S)
        wait_ready(self.bootstrap, timeout_s=START_TIMEOUT_S)
