"""The README's first command, ``./scripts/run-broker``, on a fresh copy of the repository:
it makes its own virtual environment with only what running the broker needs (no test
tools, no PySpark), runs a broker that a stock client produces to and consumes from, keeps
its data in ``./data`` of the copy, and stops cleanly on SIGTERM.

The copy is the repository's tracked files (``git ls-files``), so nothing of this checkout's
``.venv`` or data can make it pass. Its ``pip install`` comes from the package index (or
the machine's wheel cache): a minute or so."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tomllib
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer

from pytest_minikafka.subprocess_broker import read_ready_line
from tests.integration.broker_process import REPO_ROOT

pytestmark = pytest.mark.timeout(600)

SETUP_AND_START_TIMEOUT_S = 480.0
STOP_TIMEOUT_S = 30.0


def normalized(requirement: str) -> str:
    """A requirement's distribution name as pip lists it, normalized (PEP 503)."""
    match = re.match(r"[A-Za-z0-9._-]+", requirement.strip())
    assert match is not None, requirement
    return re.sub(r"[-_.]+", "-", match.group(0)).lower()


PROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
# What the broker needs to run (pyproject's dependencies), and what only the tests, the
# benches or Spark need (its extras).
RUNTIME = {normalized(r) for r in PROJECT["dependencies"]}
NOT_FOR_RUNNING = {normalized(r) for extra in PROJECT["optional-dependencies"].values()
                   for r in extra} - RUNTIME - {"setuptools", "wheel"}  # (venv's own, Python < 3.12)


def fresh_copy(dest: Path) -> Path:
    """The repository's tracked files copied to ``dest`` (no .venv, no data, no build)."""
    listed = subprocess.run(["git", "-C", str(REPO_ROOT), "ls-files", "-z"], check=True,
                            capture_output=True, timeout=60).stdout.decode().split("\0")
    files = [name for name in listed if name]
    assert "scripts/run-broker" in files and "pyproject.toml" in files
    for name in files:
        source = REPO_ROOT / name
        if not source.is_file():  # listed but deleted in this checkout
            continue
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    return dest


def installed(venv: Path) -> set[str]:
    listing = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "list",
                              "--format=json"], check=True, capture_output=True, text=True,
                             timeout=120).stdout
    return {normalized(entry["name"]) for entry in json.loads(listing)}


def test_run_broker_sets_up_only_the_runtime_and_serves_clients(tmp_path: Path) -> None:
    assert {"uvloop", "kazoo"} <= RUNTIME and {"pytest", "pyspark"} <= NOT_FOR_RUNNING
    repo = fresh_copy(tmp_path / "minikafka")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MINIKAFKA_", "VIRTUAL_ENV", "PYTHONPATH"))}
    stderr_path = tmp_path / "run-broker.stderr"
    with stderr_path.open("wb") as stderr:
        proc = subprocess.Popen([str(repo / "scripts" / "run-broker"),
                                 "--override", "listeners=PLAINTEXT://127.0.0.1:0"],
                                cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=stderr)
    try:
        assert proc.stdout is not None
        ready = read_ready_line(proc.stdout.fileno(), SETUP_AND_START_TIMEOUT_S)
        assert ready is not None, (f"run-broker exited with {proc.wait(STOP_TIMEOUT_S)}: "
                                   f"{stderr_path.read_text(errors='replace')[-4000:]}")
        bootstrap = ready.endpoints["PLAINTEXT"]

        packages = installed(repo / ".venv")
        assert "minikafka" in packages
        assert packages >= RUNTIME, f"missing: {sorted(RUNTIME - packages)}"
        assert not packages & NOT_FOR_RUNNING, (
            f"installed but not needed to run: {sorted(packages & NOT_FOR_RUNNING)}")

        producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
        try:
            for i in range(5):
                producer.send("readme-topic", f"record-{i}".encode()).get(timeout=30)
        finally:
            producer.close(timeout=10)
        consumer = KafkaConsumer("readme-topic", bootstrap_servers=bootstrap,
                                 auto_offset_reset="earliest", consumer_timeout_ms=30_000)
        values: list[bytes] = []
        try:
            for message in consumer:  # ends after 30 s without a record
                values.append(message.value)
                if len(values) == 5:
                    break
        finally:
            consumer.close()
        assert values == [f"record-{i}".encode() for i in range(5)]
        assert any((repo / "data").glob("readme-topic-0/*.log")), (
            "the partition's segment is not under ./data of the repository")
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        code = proc.wait(STOP_TIMEOUT_S)
    log = stderr_path.read_text(errors="replace")
    assert code == 0, log[-4000:]
    assert " ERROR " not in log and "Traceback" not in log, log[-4000:]
