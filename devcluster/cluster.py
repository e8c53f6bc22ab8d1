"""A development cluster on 127.0.0.1: a ZooKeeper (standalone or ensemble) and N minikafka
brokers, each a process of its own (``minikafka cluster up|status|down``, and the tests).

Layout of the cluster directory::

    cluster.json          what is running: ZooKeeper nodes and brokers (pids, ports, dirs)
    zookeeper/node-N/     ZooKeeper's config, data and log (devcluster.zookeeper)
    broker-N/data/        the broker's log.dirs
    broker-N/broker.log   its stdout and stderr

Brokers run ``python -m cli broker`` with ``broker.id=N``, ``listeners`` on 127.0.0.1
(``base_port + N - 1``, or a free port when ``base_port`` is 0), ``log.dirs`` and
``zookeeper.connect=<ensemble>/minikafka``, plus any extra properties. A broker is up when
its ``minikafka: started broker N listening on ...`` line appears in its log (bounded wait).
``up`` detaches (the processes outlive the command, in their own sessions); ``down`` stops
the brokers one at a time with SIGTERM (each moves its leaderships to the brokers still
running first: controlled shutdown), the controller last, each wait bounded, then ZooKeeper.
``status`` asks a broker for the cluster's metadata.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

from devcluster.zookeeper import REPO_ROOT, ZooKeeper, ZooKeeperError, free_ports

STATE_FILE: Final = "cluster.json"
CHROOT: Final = "/minikafka"
BROKER_START_TIMEOUT_S: Final = 90.0
BROKER_STOP_TIMEOUT_S: Final = 60.0
POLL_INTERVAL_S: Final = 0.1
READY: Final = re.compile(r"minikafka: started broker (\d+) listening on (\S+)")


class ClusterError(RuntimeError):
    """The cluster could not be started, found or stopped; the message says why."""


@dataclass(slots=True)
class BrokerInfo:
    broker_id: int
    port: int
    pid: int
    data_dir: str
    log_file: str


@dataclass(slots=True)
class ClusterState:
    zookeeper_connect: str
    zookeeper_pids: list[int]
    brokers: list[BrokerInfo] = field(default_factory=list)

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{b.port}" for b in self.brokers)

    def save(self, directory: Path) -> None:
        tmp = directory / (STATE_FILE + ".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=1))
        tmp.replace(directory / STATE_FILE)

    @classmethod
    def load(cls, directory: Path) -> ClusterState:
        path = directory / STATE_FILE
        try:
            raw: dict[str, Any] = json.loads(path.read_text())
            return cls(raw["zookeeper_connect"], list(raw["zookeeper_pids"]),
                       [BrokerInfo(**b) for b in raw["brokers"]])
        except FileNotFoundError:
            raise ClusterError(f"no cluster in {directory} ({STATE_FILE} not found)") from None
        except (ValueError, KeyError, TypeError) as exc:
            raise ClusterError(f"{path}: unreadable ({exc})") from None


def broker_command(broker_id: int, port: int, data_dir: Path, zookeeper_connect: str,
                   properties: Mapping[str, str] | None = None,
                   python: str = sys.executable) -> list[str]:
    """The command line of broker ``broker_id`` (also what the docker-compose file runs)."""
    props = {
        "broker.id": str(broker_id),
        "listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "log.dirs": str(data_dir),
        "zookeeper.connect": zookeeper_connect,
        **(properties or {}),
    }
    cmd = [python, "-m", "cli", "broker"]
    for key, value in props.items():
        cmd += ["--override", f"{key}={value}"]
    return cmd


def start_broker(directory: Path, broker_id: int, port: int, zookeeper_connect: str,
                 properties: Mapping[str, str] | None = None, *,
                 timeout_s: float = BROKER_START_TIMEOUT_S) -> BrokerInfo:
    """Start one broker detached; wait for its ready line; its bound port is returned."""
    # Absolute: the broker runs in REPO_ROOT, where a relative log dir would land otherwise.
    home = directory.resolve() / f"broker-{broker_id}"
    home.mkdir(parents=True, exist_ok=True)
    log_file = home / "broker.log"
    offset = log_file.stat().st_size if log_file.exists() else 0
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    with open(log_file, "ab") as out:
        proc = subprocess.Popen(
            broker_command(broker_id, port, home / "data", zookeeper_connect, properties),
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
            cwd=REPO_ROOT, start_new_session=True)
    deadline = time.monotonic() + timeout_s
    while True:
        with open(log_file, "rb") as log:
            log.seek(offset)
            match = READY.search(log.read().decode("utf-8", "replace"))
        if match is not None:
            bound = int(match.group(2).rsplit(":", 1)[1])
            return BrokerInfo(broker_id, bound, proc.pid, str(home / "data"), str(log_file))
        if proc.poll() is not None:
            raise ClusterError(f"broker {broker_id} exited with {proc.returncode} at start-up:\n"
                               f"{_tail(log_file)}")
        if time.monotonic() > deadline:
            proc.kill()
            raise ClusterError(f"broker {broker_id} not started after {timeout_s:.0f} s:\n"
                               f"{_tail(log_file)}")
        time.sleep(POLL_INTERVAL_S)


def up(directory: Path, *, brokers: int = 3, zookeeper_nodes: int = 1, base_port: int = 9092,
       properties: Mapping[str, str] | None = None) -> ClusterState:
    """Start ZooKeeper and the brokers, detached; the state goes to ``cluster.json``."""
    directory.mkdir(parents=True, exist_ok=True)
    if (directory / STATE_FILE).exists():
        raise ClusterError(f"a cluster is already set up in {directory}: `minikafka cluster "
                           "down` it first (or remove its cluster.json)")
    if brokers < 1:
        raise ClusterError("--brokers must be at least 1")
    zk = ZooKeeper(directory / "zookeeper", nodes=zookeeper_nodes, force_sync=True,
                   die_with_parent=False)
    try:
        zk.start()
    except ZooKeeperError as exc:
        raise ClusterError(f"ZooKeeper did not start: {exc}") from None
    state = ClusterState(zk.connect_string + CHROOT, [n.pid for n in zk.nodes])
    state.save(directory)
    props = {"offsets.topic.replication.factor": str(min(3, brokers)),
             "default.replication.factor": str(min(3, brokers)), **(properties or {})}
    ports = free_ports(brokers) if base_port == 0 else [base_port + i for i in range(brokers)]
    for i, port in enumerate(ports, start=1):
        try:
            state.brokers.append(start_broker(directory, i, port, state.zookeeper_connect, props))
        finally:
            state.save(directory)
    return state


def down(directory: Path, *, timeout_s: float = BROKER_STOP_TIMEOUT_S,
         controller_id: int | None = None) -> ClusterState:
    """Stop the brokers one at a time, the controller last (each SIGTERM is a controlled
    shutdown: its leaderships move to brokers still running), then ZooKeeper."""
    state = ClusterState.load(directory)
    order = sorted(state.brokers, key=lambda b: (b.broker_id == controller_id, b.broker_id))
    for broker in order:
        _signal(broker.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while _alive(broker.pid) and time.monotonic() < deadline:
            time.sleep(POLL_INTERVAL_S)
        if _alive(broker.pid):
            _signal(broker.pid, signal.SIGKILL)
    for pid in state.zookeeper_pids:
        _signal(pid, signal.SIGTERM)
    zk_deadline = time.monotonic() + 15
    for pid in state.zookeeper_pids:
        while _alive(pid) and time.monotonic() < zk_deadline:
            time.sleep(POLL_INTERVAL_S)
        if _alive(pid):
            _signal(pid, signal.SIGKILL)
    (directory / STATE_FILE).unlink(missing_ok=True)
    return state


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie child counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _tail(path: Path, limit: int = 4000) -> str:
    try:
        return path.read_bytes()[-limit:].decode("utf-8", "replace")
    except OSError:
        return ""
