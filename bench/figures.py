"""What a scenario run yields: figures (one number each, with the CPU spent to get it).

A ``Figure`` is one metric of one run against one broker, e.g. P1 "records/s" for
"minikafka" in run 2. CPU is given as a percentage of one core over the run's wall time,
for the broker's process tree (/proc/<pid>/stat utime+stime delta) and for the client
process (its own /proc/self/stat delta), or None where it does not apply.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from bench.stats import Summary


@dataclass(frozen=True, slots=True)
class Figure:
    scenario: str  # "P1"
    row: str  # "P1 produce, 1 partition (librdkafka)"
    metric: str  # "records/s"
    broker: str  # "minikafka", "Kafka", "minikafka-copy", "loopback"
    run: int
    value: float
    higher_is_better: bool
    broker_cpu_pct: float | None = None
    client_cpu_pct: float | None = None


@dataclass(frozen=True, slots=True)
class Failure:
    scenario: str
    broker: str
    run: int
    message: str


@dataclass(slots=True)
class Results:
    """Every figure and failure of one bench invocation, in the order they were taken."""

    figures: list[Figure] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "figures": [asdict(f) for f in self.figures],
            "failures": [asdict(f) for f in self.failures],
            "notes": list(self.notes),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Results:
        return cls(
            figures=[Figure(**f) for f in data["figures"]],
            failures=[Failure(**f) for f in data["failures"]],
            notes=list(data["notes"]),
        )

    def rows(self) -> list[tuple[str, str]]:
        """(row, metric) pairs in first-seen order."""
        seen: dict[tuple[str, str], None] = {}
        for fig in self.figures:
            seen.setdefault((fig.row, fig.metric), None)
        return list(seen)

    def brokers_of(self, row: str, metric: str) -> list[str]:
        seen: dict[str, None] = {}
        for fig in self.figures:
            if fig.row == row and fig.metric == metric:
                seen.setdefault(fig.broker, None)
        return list(seen)

    def select(self, row: str, metric: str, broker: str) -> list[Figure]:
        return [
            f for f in self.figures if f.row == row and f.metric == metric and f.broker == broker
        ]

    def summary(self, row: str, metric: str, broker: str) -> Summary:
        return Summary.of([f.value for f in self.select(row, metric, broker)])

    def cpu(self, row: str, metric: str, broker: str) -> tuple[Summary, Summary]:
        """Median broker and client CPU % of one core for the row, over the runs that had it."""
        figs = self.select(row, metric, broker)
        return (
            Summary.of([f.broker_cpu_pct for f in figs if f.broker_cpu_pct is not None]),
            Summary.of([f.client_cpu_pct for f in figs if f.client_cpu_pct is not None]),
        )


def cpu_pct(cpu_s: float | None, wall_s: float) -> float | None:
    """CPU seconds over wall seconds, as % of one core (None when unknown)."""
    if cpu_s is None or wall_s <= 0:
        return None
    return 100.0 * cpu_s / wall_s
