"""What every scenario uses: sizes, the work dir, load processes and optional profiling.

``Sizes`` holds the workload sizes (full run and ``--quick``). ``RunContext.load`` starts a
``bench.load`` process (librdkafka in its own process) against a broker and returns a
``bench.load_procs.LoadProc``; ``LoadProc.result`` waits for its JSON line, charging the
broker's process tree with the CPU it used meanwhile. ``RunContext.profiled`` wraps a run in
py-spy.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

from bench.brokers import BrokerUnderTest
from bench.load_procs import LoadOutcome, LoadProc, start_load
from bench.procs import spawn, stop
from bench.warming import NO_WARM_UP, WarmUp

PY_SPY: Final[Path] = Path(sys.executable).parent / "py-spy"
PROFILED: Final[tuple[str, ...]] = ("minikafka", "minikafka-metrics")  # py-spy watches these
# P5's load, unmeasured, on each broker before its measured runs, while the broker's CPU per
# request still falls (bench.warming): Kafka's JIT took 35-45 s of it in quiet slots.
P5_WARM_UP: Final[WarmUp] = WarmUp(min_s=20.0, max_s=60.0, run_s=5.0)
# P4's load (its rates in turn, each run's seconds split evenly over them), unmeasured, on
# each broker before its measured runs, while the broker's CPU per record still falls.
P4_WARM_UP: Final[WarmUp] = WarmUp(min_s=30.0, max_s=90.0, run_s=10.0)


@dataclass(frozen=True, slots=True)
class Sizes:
    record_bytes: int = 100
    p1_records: int = 1_000_000
    p2_records: int = 1_000_000
    p4_rates: tuple[int, ...] = (10_000, 50_000)  # one P4 row per rate, in this order
    p4_duration_s: float = 15.0
    # The first seconds of each P4 run's records, which its consumer does not measure.
    p4_unmeasured_s: float = 3.0
    p4_warm_up: WarmUp = P4_WARM_UP
    p5_producers: int = 16
    p5_duration_s: float = 10.0
    p5_warm_up: WarmUp = P5_WARM_UP
    p6_size_bytes: int = 2_000_000_000
    p6_record_bytes: int = 1024
    p2l_records: int = 32_768  # P2L: 2 GiB of 64 KiB records
    p2l_record_bytes: int = 64 << 10
    p7_partitions: tuple[int, ...] = (1, 100, 1_000, 10_000)
    p7_records: int = 1_000_000
    p7_warmup_records: int = 200_000
    p7_metadata_requests: int = 200
    java: bool = True
    warmup_records: int = 500_000  # produced and consumed once per broker before measuring


FULL: Final[Sizes] = Sizes()
QUICK: Final[Sizes] = replace(
    FULL,
    p1_records=20_000,
    p2_records=20_000,
    p4_rates=(10_000,),
    p4_duration_s=2.0,
    p4_unmeasured_s=0.5,
    p4_warm_up=NO_WARM_UP,
    p5_duration_s=1.5,
    p5_warm_up=NO_WARM_UP,
    p6_size_bytes=20_000_000,
    p2l_records=256,
    p7_partitions=(1, 100),
    p7_records=20_000,
    p7_warmup_records=0,
    p7_metadata_requests=20,
    java=False,
    warmup_records=0,
)


@dataclass(slots=True)
class RunContext:
    work_dir: Path
    results_dir: Path
    sizes: Sizes
    profile: bool = False
    profile_duration_s: int = 120
    # Failures of a part of a run that do not void the rest (a second-opinion tool);
    # the runner records them as Failures after each run.
    soft_failures: list[str] = field(default_factory=list)
    # Lines for the report's notes (what a scenario's unmeasured warm-up did); the runner
    # moves them into the results after each step.
    notes: list[str] = field(default_factory=list)

    def load(self, broker: BrokerUnderTest, spec: dict[str, Any], *, name: str) -> LoadProc:
        """Start a librdkafka load process against broker (see bench.load for specs)."""
        full = {"bootstrap": broker.bootstrap, "timeout_s": 300, **spec}
        return start_load(full, name=name, log_path=self.work_dir / "load.log",
                          cpu_pid=broker.pid, broker_name=broker.name)

    def run_load(self, broker: BrokerUnderTest, spec: dict[str, Any], *, name: str) -> LoadOutcome:
        """Run one load process to completion and return its outcome."""
        timeout_s = float(spec.get("timeout_s", 300)) + 60.0
        return self.load(broker, spec, name=name).result(timeout_s)

    @contextlib.contextmanager
    def profiled(self, broker: BrokerUnderTest, label: str, *, enabled: bool) -> Iterator[None]:
        """py-spy the broker while the block runs; SVG to results_dir/<label>.svg."""
        if not (self.profile and enabled and broker.pid):
            yield
            return
        svg = self.results_dir / f"{label}.svg"
        proc = spawn(
            [
                str(PY_SPY),
                "record",
                "--format",
                "flamegraph",
                "--output",
                str(svg),
                "--pid",
                str(broker.pid),
                "--duration",
                str(self.profile_duration_s),
                "--rate",
                "200",
                "--subprocesses",
                "--nonblocking",
            ],
            log_path=self.work_dir / "py-spy.log",
        )
        time.sleep(0.5)  # py-spy attaches before the load starts
        try:
            yield
        finally:
            # py-spy writes its output on SIGINT, as on Ctrl-C.
            stop(proc, grace_s=30.0, sig=signal.SIGINT)
