"""minikafka, the broker under test, started as its own process the way an operator would.

``.venv/bin/python -m broker.cli broker --override listeners=PLAINTEXT://127.0.0.1:<port>
--override log.dirs=<dir> --override <k>=<v> ...`` with ``brokers.SHARED_SETTINGS``; extra
environment (for instance ``MINIKAFKA_FETCH_COPY=1``, the copying fetch path used for the
zero-copy comparison) is passed through ``env``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from bench.admin import wait_ready
from bench.brokers import SHARED_SETTINGS, SubprocessBroker
from bench.procs import BenchError, free_port, spawn, wait_for_port

REPO_ROOT: Final[Path] = Path(__file__).resolve().parent.parent
START_TIMEOUT_S: Final[float] = 120.0


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

    def argv(self) -> list[str]:
        props = {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(self.log_dir),
            **self.settings,
        }
        overrides = [arg for k, v in props.items() for arg in ("--override", f"{k}={v}")]
        return [sys.executable, "-m", "broker.cli", "broker", *overrides]

    def launch(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            raise BenchError(f"{self.name} already running")
        self.work_dir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **self.extra_env}
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
