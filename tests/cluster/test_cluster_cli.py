"""``minikafka cluster up|status|down`` and ``minikafka leader-election`` on a development
cluster (real ZooKeeper and broker processes, detached as the command leaves them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.broker_process import REPO_ROOT

pytestmark = [pytest.mark.timeout(300)]


def cli(*args: str, timeout_s: float = 180) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run([sys.executable, "-m", "cli", *args], capture_output=True, text=True,
                          timeout=timeout_s, cwd=REPO_ROOT, env=env)


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_cluster_up_status_down(tmp_path: Path) -> None:
    directory = tmp_path / "dev"
    up = cli("cluster", "up", "--brokers", "3", "--zookeeper-ensemble", "3", "--base-port", "0",
             "--dir", str(directory),
             "--override", "zookeeper.session.timeout.ms=6000",
             "--override", "controlled.shutdown.retry.backoff.ms=300")
    state = json.loads((directory / "cluster.json").read_text()) if (
        directory / "cluster.json").exists() else None
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        assert state is not None
        bootstrap = ",".join(f"127.0.0.1:{b['port']}" for b in state["brokers"])
        assert f"bootstrap.servers={bootstrap}" in up.stdout
        (connect,) = [line for line in up.stdout.splitlines()
                      if line.startswith("zookeeper.connect=")]
        servers, _, chroot = connect.removeprefix("zookeeper.connect=").partition("/")
        assert chroot == "minikafka" and len(servers.split(",")) == 3, connect
        assert len(state["zookeeper_pids"]) == 3 and all(map(alive, state["zookeeper_pids"]))
        created = cli("topics", "--bootstrap-server", bootstrap, "--create", "--topic", "dev",
                      "--partitions", "3", "--replication-factor", "3")
        assert created.returncode == 0, created.stdout + created.stderr
        status = cli("cluster", "status", "--dir", str(directory))
        assert status.returncode == 0, status.stderr
        lines = status.stdout.splitlines()
        assert lines[0] == f"ZooKeeper: {connect.removeprefix('zookeeper.connect=')}"
        assert any(line.startswith("Cluster id: ") and "Controller: " in line for line in lines)
        assert sum(1 for line in lines if line.strip().split()[1:2] == ["up"]) == 3
        dev = [line for line in lines if line.strip().startswith("dev-")]
        assert len(dev) == 3 and all("replicas" in line and "isr" in line for line in dev)
        assert "Under-replicated partitions: 0" in status.stdout
        again = cli("cluster", "up", "--dir", str(directory))
        assert again.returncode == 1 and "already set up" in again.stderr
    finally:
        down = cli("cluster", "down", "--dir", str(directory))
    assert down.returncode == 0, down.stdout + down.stderr
    assert "stopped 3 brokers and ZooKeeper" in down.stdout
    assert not (directory / "cluster.json").exists()
    assert state is not None
    assert not any(alive(b["pid"]) for b in state["brokers"])
    assert not any(alive(pid) for pid in state["zookeeper_pids"])
    # Each broker moved its leaderships away before stopping (the controller last).
    logs = [Path(b["log_file"]).read_text() for b in state["brokers"]]
    assert sum("Controlled shutdown request returned successfully" in log for log in logs) >= 2
    missing = cli("cluster", "status", "--dir", str(directory))
    assert missing.returncode == 1 and "no cluster in" in missing.stderr
