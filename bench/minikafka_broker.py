"""minikafka, the broker under test, started as its own process the way an operator would.

``.venv/bin/python -m cli broker --override listeners=PLAINTEXT://127.0.0.1:<port>
--override log.dirs=<dir> --override <k>=<v> ...`` with ``brokers.SHARED_SETTINGS``; extra
environment (for instance ``MINIKAFKA_FETCH_COPY=1``, the copying fetch path used for the
zero-copy comparison) is passed through ``env``. ``PYTHONDONTWRITEBYTECODE`` is dropped
from the broker's environment: it starts from its bytecode cache (written by its first
start), as an installed broker does, rather than compiling every module at each start
(P6's and P7's start-up times).

``MiniKafkaWithMetrics`` (``--brokers minikafka-metrics``) is the same broker with its
Prometheus endpoint on (``metrics.prometheus.listener``) and scraped every
``SCRAPE_INTERVAL_S`` by a thread of the bench while it runs, as Prometheus would (more
often than Prometheus's default 15 s), so the cost of metrics includes serving them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from bench.admin import wait_ready
from bench.brokers import SHARED_SETTINGS, SubprocessBroker
from bench.procs import BenchError, free_port, spawn, wait_for_port

REPO_ROOT: Final[Path] = Path(__file__).resolve().parent.parent
START_TIMEOUT_S: Final[float] = 120.0
SCRAPE_INTERVAL_S: Final[float] = 5.0


def minikafka_version() -> str:
    out = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "log", "-1", "--format=%h %cd", "--date=iso"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    return f"minikafka {out.stdout.strip() or '(no git)'} on Python {sys.version.split()[0]}"


class MiniKafka(SubprocessBroker):
    """One minikafka broker process with its log dir under ``work_dir``."""

    def __init__(
        self,
        work_dir: Path,
        *,
        name: str = "minikafka",
        env: Mapping[str, str] | None = None,
        settings: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self.work_dir = work_dir
        self.log_dir = work_dir / "data"
        self.port = free_port()
        self.extra_env = dict(env or {})
        self.settings = {**SHARED_SETTINGS, **(settings or {})}
        self._proc: subprocess.Popen[bytes] | None = None

    def version(self) -> str:
        return minikafka_version()

    def fresh(self, work_dir: Path) -> MiniKafka:
        return MiniKafka(work_dir, name=self.name, env=self.extra_env, settings=self.settings)

    def argv(self) -> list[str]:
        props = {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(self.log_dir),
            **self.settings,
        }
        overrides = [arg for k, v in props.items() for arg in ("--override", f"{k}={v}")]
        return [sys.executable, "-m", "cli", "broker", *overrides]

    def launch(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            raise BenchError(f"{self.name} already running")
        self.work_dir.mkdir(parents=True, exist_ok=True)
        # As an operator runs it: with the bytecode cache (an installed package has one), so
        # that a start-up is not also a compile of every module.
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(self.extra_env)
        self._proc = spawn(
            self.argv(), log_path=self.work_dir / "broker.log", env=env, cwd=REPO_ROOT
        )

    def wait_started(self) -> None:
        if self._proc is None:
            raise BenchError(f"{self.name} not launched")
        try:
            wait_for_port(self.port, proc=self._proc, timeout_s=START_TIMEOUT_S)
            wait_ready(self.bootstrap, timeout_s=START_TIMEOUT_S)
        except BenchError as exc:
            tail = (self.work_dir / "broker.log").read_text(errors="replace")[-2000:]
            raise BenchError(f"{exc}\n--- {self.name} log tail ---\n{tail}") from exc


class MiniKafkaWithMetrics(MiniKafka):
    """minikafka with metrics on, scraped every ``SCRAPE_INTERVAL_S`` while running."""

    def __init__(self, work_dir: Path, *, name: str = "minikafka-metrics") -> None:
        self.metrics_port = free_port()
        super().__init__(work_dir, name=name, settings={
            "metrics.prometheus.listener": f"127.0.0.1:{self.metrics_port}"})
        self._stop_scraping = threading.Event()
        self._scraper: threading.Thread | None = None
        self.scrapes = 0
        self.scrape_errors = 0

    def fresh(self, work_dir: Path) -> MiniKafkaWithMetrics:
        return MiniKafkaWithMetrics(work_dir, name=self.name)

    def wait_started(self) -> None:
        super().wait_started()
        self._stop_scraping.clear()
        self._scraper = threading.Thread(target=self._scrape_loop, name="scraper", daemon=True)
        self._scraper.start()

    def _scrape_loop(self) -> None:
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        while not self._stop_scraping.wait(SCRAPE_INTERVAL_S):
            try:
                with urllib.request.urlopen(url, timeout=10) as response:
                    response.read()
                self.scrapes += 1
            except OSError:
                self.scrape_errors += 1

    def stop(self) -> float:
        self._stop_scraping.set()
        if self._scraper is not None:
            self._scraper.join(timeout=15)
            self._scraper = None
        return super().stop()
