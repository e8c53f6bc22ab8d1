"""Real ZooKeeper servers on 127.0.0.1: one standalone node or an N-node ensemble.

The server is Apache ZooKeeper 3.8.4 from the jars ``tools/fetch-kafka-jars`` brings from
Maven Central for Kafka 3.9.1 (``zookeeper-3.8.4.jar``, ``zookeeper-jute``, netty, reload4j):
``java -cp '<libs>/*' org.apache.zookeeper.server.quorum.QuorumPeerMain zoo.cfg``. No system
package is needed. Another jar directory can be given (``classpath=``, or the environment
variable ``MINIKAFKA_KAFKA_LIBS``).

Layout of ``work_dir`` (one directory per node)::

    node-<myid>/zoo.cfg            tickTime, dataDir, clientPort(Address), server.N lines
    node-<myid>/log4j.properties   INFO to node-<myid>/zookeeper.log
    node-<myid>/data/myid          the node's id (ensembles only)
    node-<myid>/zookeeper.log      the server's log; stdout/stderr go to node-<myid>/stdout.log

Ports (client, quorum, election) are free ephemeral ports picked at ``start()``; a clash with
another process (the port was taken between picking and binding) shows as a node that exits
or never serves, and ``start()`` retries with new ports (bounded). Nodes given addresses of
their own (``hosts=``, for instance one network namespace each, entered through ``wrappers=``
such as ``["ip", "netns", "exec", "ns1"]``) use ZooKeeper's usual ports 2181/2888/3888. Readiness is the ``srvr``
four-letter word answering ``Mode: standalone|leader|follower`` (``ruok`` answers ``imok``
before an ensemble member has joined a quorum, so it is not used for that).

Every wait is bounded. A node is its own process group (``start_new_session``); when
``setpriv`` exists the JVM also gets ``PR_SET_PDEATHSIG=SIGKILL``, so a killed test run does
not leave servers behind (the signal follows the death of the *thread* that started the node:
start nodes from a long-lived thread). ``die_with_parent=False`` is for servers meant to
outlive the command that started them (``minikafka cluster up``).

Fault injection for tests: ``node.kill()`` (SIGKILL), ``node.pause()``/``node.resume()``
(SIGSTOP/SIGCONT), ``node.start()`` again on the same ports and data.

Not thread-safe: one owner drives a ``ZooKeeper``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Final

REPO_ROOT: Final = Path(__file__).resolve().parent.parent
DEFAULT_LIBS: Final = REPO_ROOT / "tools" / "kafka-jars" / "libs"
LIBS_ENV: Final = "MINIKAFKA_KAFKA_LIBS"
MAIN_CLASS: Final = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
SERVER_JAR_GLOB: Final = "zookeeper-3*.jar"

START_TIMEOUT_S: Final = 90.0
STOP_TIMEOUT_S: Final = 15.0
FOUR_LETTER_TIMEOUT_S: Final = 2.0
START_ATTEMPTS: Final = 3
POLL_INTERVAL_S: Final = 0.1
MAX_FOUR_LETTER_BYTES: Final = 64 * 1024
LOG_TAIL_BYTES: Final = 4000
OWN_HOST_PORTS: Final = (2181, 2888, 3888)  # client, quorum, election: nodes with hosts=
SERVING_MODES: Final = frozenset({"standalone", "leader", "follower", "observer"})

# A test server: small heap, quick start (C1 only), little CPU while idle.
JVM_FLAGS: Final[tuple[str, ...]] = (
    "-Xmx256m",
    "-Xms32m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Djava.awt.headless=true",
    "-Dzookeeper.jmx.log4j.disable=true",
)

LOG4J: Final = """\
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File={log_file}
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
"""


class ZooKeeperError(RuntimeError):
    """A server did not start or stop as asked; the message carries its log's tail."""


def kafka_libs(classpath: Path | None = None) -> Path:
    """The directory of jars holding the ZooKeeper server; ZooKeeperError when absent."""
    libs = classpath or Path(os.environ.get(LIBS_ENV) or DEFAULT_LIBS)
    if not any(libs.glob(SERVER_JAR_GLOB)):
        raise ZooKeeperError(f"no ZooKeeper server jar ({SERVER_JAR_GLOB}) in {libs}: run "
                             f"tools/fetch-kafka-jars, or set {LIBS_ENV} to a directory of jars")
    return libs


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports that were free on 127.0.0.1 a moment ago."""
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for sock in sockets:
            sock.close()


def four_letter_word(port: int, word: str, *, host: str = "127.0.0.1",
                     timeout_s: float = FOUR_LETTER_TIMEOUT_S) -> str:
    """Send a four-letter word (``ruok``, ``srvr``, ``mntr``, ...) and return the answer.

    OSError when nothing listens or the server does not answer within ``timeout_s``."""
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        sock.sendall(word.encode("ascii"))
        chunks: list[bytes] = []
        size = 0
        deadline = time.monotonic() + timeout_s
        while size < MAX_FOUR_LETTER_BYTES:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            chunk = sock.recv(4096)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def server_mode(port: int, *, host: str = "127.0.0.1") -> str | None:
    """``standalone``, ``leader``, ``follower`` (serving), or None (down / not serving)."""
    try:
        answer = four_letter_word(port, "srvr", host=host)
    except OSError:
        return None
    for line in answer.splitlines():
        if line.startswith("Mode:"):
            mode = line.partition(":")[2].strip()
            return mode if mode in SERVING_MODES else None
    return None


@dataclass(frozen=True, slots=True)
class NodePorts:
    client: int
    quorum: int
    election: int


class ZooKeeperNode:
    """One server of a standalone set-up or an ensemble (``myid`` from 1)."""

    def __init__(self, owner: ZooKeeper, myid: int) -> None:
        self._owner = owner
        self.myid = myid
        self.dir = owner.work_dir / f"node-{myid}"
        self.data_dir = self.dir / "data"
        self.log_path = self.dir / "zookeeper.log"
        self.stdout_path = self.dir / "stdout.log"
        self.host = owner.host_of(myid)
        self.ports = NodePorts(0, 0, 0)
        self.proc: subprocess.Popen[bytes] | None = None
        self.paused = False

    # -- addresses and state -----------------------------------------------------------

    @property
    def client_port(self) -> int:
        return self.ports.client

    @property
    def address(self) -> str:
        return f"{self.host}:{self.ports.client}"

    @property
    def pid(self) -> int:
        if self.proc is None:
            raise ZooKeeperError(f"ZooKeeper node {self.myid} was never started")
        return self.proc.pid

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def mode(self) -> str | None:
        """The node's role as ``srvr`` reports it; None when down, paused or not serving."""
        if not self.running() or self.paused:
            return None
        return server_mode(self.ports.client, host=self.host)

    def log_tail(self, limit: int = LOG_TAIL_BYTES) -> str:
        parts = []
        for path in (self.stdout_path, self.log_path):
            with contextlib.suppress(OSError):
                data = path.read_bytes()[-limit:].decode("utf-8", "replace")
                if data.strip():
                    parts.append(f"--- {path} ---\n{data}")
        return "\n".join(parts)

    # -- configuration -----------------------------------------------------------------

    def write_config(self) -> Path:
        owner = self._owner
        self.data_dir.mkdir(parents=True, exist_ok=True)
        lines = [
            f"tickTime={owner.tick_time_ms}",
            "initLimit=20",
            "syncLimit=10",
            f"dataDir={self.data_dir}",
            f"clientPort={self.ports.client}",
            f"clientPortAddress={self.host}",
            "admin.enableServer=false",
            "4lw.commands.whitelist=*",
            f"minSessionTimeout={owner.min_session_timeout_ms}",
            f"maxSessionTimeout={owner.max_session_timeout_ms}",
            f"forceSync={'yes' if owner.force_sync else 'no'}",
            "maxClientCnxns=0",
        ]
        if len(owner.nodes) > 1:
            (self.data_dir / "myid").write_text(f"{self.myid}\n")
            lines += [f"server.{n.myid}={n.host}:{n.ports.quorum}:{n.ports.election}"
                      for n in owner.nodes]
        config = self.dir / "zoo.cfg"
        config.write_text("\n".join(lines) + "\n")
        (self.dir / "log4j.properties").write_text(LOG4J.format(log_file=self.log_path))
        return config

    def command(self) -> list[str]:
        argv = [*self._owner.wrapper_of(self.myid), "java", *JVM_FLAGS,
                f"-Dlog4j.configuration=file:{self.dir / 'log4j.properties'}",
                "-cp", f"{self._owner.libs}/*", MAIN_CLASS, str(self.dir / "zoo.cfg")]
        setpriv = shutil.which("setpriv")
        if self._owner.die_with_parent and setpriv is not None:
            argv = [setpriv, "--pdeathsig", "KILL", "--", *argv]
        return argv

    # -- life cycle --------------------------------------------------------------------

    def start(self) -> None:
        """Launch the JVM (same ports and data as before); does not wait for it to serve."""
        if self.running():
            raise ZooKeeperError(f"ZooKeeper node {self.myid} is already running")
        self.write_config()
        with open(self.stdout_path, "ab") as out:
            self.proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        self.paused = False

    def kill(self) -> None:
        """SIGKILL, as a crash: no goodbye to clients or peers."""
        self._signal_group(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(timeout=STOP_TIMEOUT_S)
        self.paused = False

    def pause(self) -> None:
        """SIGSTOP: the process stays but answers nothing (a hung server)."""
        if not self.running():
            raise ZooKeeperError(f"ZooKeeper node {self.myid} is not running")
        self._signal_group(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        self._signal_group(signal.SIGCONT)
        self.paused = False

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM (and SIGCONT, in case it is paused), then SIGKILL after ``timeout_s``."""
        if not self.running():
            return
        self._signal_group(signal.SIGTERM)
        self._signal_group(signal.SIGCONT)
        assert self.proc is not None
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
        self.paused = False

    def _signal_group(self, sig: int) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)


class ZooKeeper:
    """A standalone ZooKeeper (``nodes=1``) or an ensemble (``nodes=3``) on 127.0.0.1.

    ``with ZooKeeper(tmp_dir, nodes=3) as zk: zk.connect_string`` -> ``"127.0.0.1:p1,..."``.
    ``hosts`` gives each node an address of its own (default: all on 127.0.0.1, free ports)
    and ``wrappers`` a command prefix per node that runs it there (``ip netns exec NS``).
    ``tick_time_ms`` is small by default (500 ms) so sessions expire close to their timeout
    (ZooKeeper expires sessions on tick boundaries); session timeouts from 1 s to 60 s are
    accepted. ``force_sync=False`` skips fsync of the transaction log (tests and development;
    nothing survives a machine crash anyway)."""

    def __init__(self, work_dir: Path, nodes: int = 1, *, tick_time_ms: int = 500,
                 min_session_timeout_ms: int = 1000, max_session_timeout_ms: int = 60000,
                 force_sync: bool = False, classpath: Path | None = None,
                 die_with_parent: bool = True, hosts: Sequence[str] | None = None,
                 wrappers: Sequence[Sequence[str]] | None = None) -> None:
        if nodes < 1:
            raise ValueError("a ZooKeeper needs at least one node")
        if hosts is not None and len(hosts) != nodes:
            raise ValueError(f"{len(hosts)} hosts for {nodes} ZooKeeper nodes")
        if wrappers is not None and len(wrappers) != nodes:
            raise ValueError(f"{len(wrappers)} wrappers for {nodes} ZooKeeper nodes")
        self.hosts = list(hosts) if hosts is not None else None
        self.wrappers = [list(w) for w in wrappers] if wrappers is not None else None
        self.work_dir = Path(work_dir)
        self.tick_time_ms = tick_time_ms
        self.min_session_timeout_ms = min_session_timeout_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.force_sync = force_sync
        self.die_with_parent = die_with_parent
        self.libs = kafka_libs(classpath)
        self.nodes = [ZooKeeperNode(self, myid) for myid in range(1, nodes + 1)]

    @property
    def connect_string(self) -> str:
        """``host:port,host:port`` of every node (append ``/chroot`` for a broker)."""
        return ",".join(node.address for node in self.nodes)

    def host_of(self, myid: int) -> str:
        return self.hosts[myid - 1] if self.hosts is not None else "127.0.0.1"

    def wrapper_of(self, myid: int) -> list[str]:
        return self.wrappers[myid - 1] if self.wrappers is not None else []

    def node(self, myid: int) -> ZooKeeperNode:
        return self.nodes[myid - 1]

    def leader(self) -> ZooKeeperNode | None:
        """The serving leader (or the standalone server), if any."""
        for node in self.nodes:
            if node.mode() in ("leader", "standalone"):
                return node
        return None

    # -- life cycle --------------------------------------------------------------------

    def start(self, timeout_s: float = START_TIMEOUT_S) -> ZooKeeper:
        """Start every node on fresh ports and wait until all serve; ZooKeeperError if not.

        A port clash (or any failed attempt) is retried with new ports, START_ATTEMPTS
        times; ``timeout_s`` bounds each attempt."""
        failures: list[str] = []
        for _attempt in range(START_ATTEMPTS):
            if self.hosts is not None:  # an address each: the usual ports
                for node in self.nodes:
                    node.ports = NodePorts(*OWN_HOST_PORTS)
            else:
                ports = free_ports(3 * len(self.nodes))
                for i, node in enumerate(self.nodes):
                    node.ports = NodePorts(*ports[3 * i:3 * i + 3])
            try:
                for node in self.nodes:
                    node.start()
                self.wait_serving(timeout_s=timeout_s)
                return self
            except ZooKeeperError as exc:
                failures.append(str(exc))
                self.stop()
        raise ZooKeeperError(f"ZooKeeper did not start in {START_ATTEMPTS} attempts:\n"
                             + "\n".join(failures))

    def wait_serving(self, nodes: Sequence[ZooKeeperNode] | None = None, *,
                     timeout_s: float = START_TIMEOUT_S) -> None:
        """Wait until every node in ``nodes`` (default: all) serves clients."""
        waiting = list(self.nodes if nodes is None else nodes)
        deadline = time.monotonic() + timeout_s
        while waiting:
            for node in list(waiting):
                if not node.running():
                    raise ZooKeeperError(f"ZooKeeper node {node.myid} exited with "
                                         f"{node.proc.returncode if node.proc else '?'}:\n"
                                         f"{node.log_tail()}")
                if node.mode() is not None:
                    waiting.remove(node)
            if not waiting:
                return
            if time.monotonic() > deadline:
                tails = "\n".join(n.log_tail() for n in waiting)
                raise ZooKeeperError(f"ZooKeeper node(s) {[n.myid for n in waiting]} not "
                                     f"serving after {timeout_s:.0f} s:\n{tails}")
            time.sleep(POLL_INTERVAL_S)

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        for node in self.nodes:
            node.stop(timeout_s)

    def __enter__(self) -> ZooKeeper:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

