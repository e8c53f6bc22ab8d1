"""The run's history, Jepsen-style: every send with its outcome, every fault, every commit.

Times are seconds on the monotonic clock since the run started (``History.now()``); the
wall-clock time of the start is kept too, so a moment maps to the brokers' log lines
(``wall(t)``). Workload threads add events concurrently: every mutation takes one lock.

A send's outcome is one of:

- ``ok``: the client reported the record acknowledged (with its offset, for acks=all by every
  in-sync replica, for acks=1 by the leader);
- ``fail``: the client reported an error; the record may still have been written (a timeout
  is indeterminate), so a failed record found in the log is not an anomaly;
- ``unknown``: no answer before the workload stopped.

Everything is also appended to ``history.jsonl`` in the run directory (one JSON object a
line, ``type`` first), written when the run ends, for post-mortems.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

Outcome = Literal["ok", "fail", "unknown"]
VALUE_SEPARATOR: Final = ":"


def record_value(writer: str, seq: int) -> bytes:
    """The bytes a writer sends as its record ``seq``: unique in the run."""
    return f"{writer}{VALUE_SEPARATOR}{seq}".encode()


def parse_value(value: bytes | None) -> tuple[str, int] | None:
    """``(writer, seq)`` of a record written by a workload, None for anything else."""
    if value is None:
        return None
    writer, sep, seq = value.decode("utf-8", "replace").rpartition(VALUE_SEPARATOR)
    if not sep or not seq.isdigit():
        return None
    return writer, int(seq)


@dataclass(slots=True)
class Send:
    writer: str  # one producer workload ("kp-all", "ck-all", "ck-acks1")
    instance: int  # the writer's producer instance (a new one after a fatal error)
    seq: int  # unique per writer, increasing in send order
    topic: str
    partition: int
    acks: int  # -1 (all) or 1
    t_send: float
    outcome: Outcome = "unknown"
    t_done: float | None = None
    offset: int | None = None
    error: str | None = None


@dataclass(slots=True)
class FaultEvent:
    index: int
    kind: str
    target: str  # what was hit: "broker 2 (leader of chaos-all-3)", "zookeeper 1", ...
    t_start: float
    t_healed: float | None = None
    t_recovered: float | None = None  # the cluster whole again (None: not within the bound)
    details: list[str] = field(default_factory=list)
    not_whole: list[str] = field(default_factory=list)  # why not, when the bound was reached


@dataclass(slots=True)
class Commit:
    """A committed offset of the group: acknowledged to a consumer, or read by the observer
    (``t`` is when the request was sent; ``t_done`` when answered)."""

    source: Literal["consumer", "observer"]
    who: str
    topic: str
    partition: int
    offset: int
    t: float
    t_done: float


class History:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._t0 = time.monotonic()
        self.wall0 = time.time()
        self.sends: list[Send] = []
        self.faults: list[FaultEvent] = []
        self.commits: list[Commit] = []
        self.notes: list[tuple[float, str]] = []
        # Why the cluster was not whole after the final heal (empty: it was).
        self.final_not_whole: list[str] = []

    def now(self) -> float:
        return time.monotonic() - self._t0

    def wall(self, t: float) -> float:
        """The wall-clock time (epoch seconds) of history time ``t``."""
        return self.wall0 + t

    # -- recording (any thread) ----------------------------------------------------------

    def send(self, writer: str, instance: int, seq: int, topic: str, partition: int,
             acks: int) -> Send:
        event = Send(writer, instance, seq, topic, partition, acks, self.now())
        with self._lock:
            self.sends.append(event)
        return event

    def done(self, event: Send, outcome: Outcome, *, offset: int | None = None,
             error: str | None = None) -> None:
        with self._lock:
            if event.outcome != "unknown":
                return  # a client reporting twice: the first answer stands
            event.outcome = outcome
            event.t_done = self.now()
            event.offset = offset
            event.error = error

    def fault(self, kind: str, target: str) -> FaultEvent:
        with self._lock:
            event = FaultEvent(len(self.faults), kind, target, self.now())
            self.faults.append(event)
        return event

    def commit(self, commit: Commit) -> None:
        with self._lock:
            self.commits.append(commit)

    def note(self, text: str) -> None:
        with self._lock:
            self.notes.append((self.now(), text))

    # -- reading -------------------------------------------------------------------------

    def snapshot_sends(self) -> list[Send]:
        with self._lock:
            return list(self.sends)

    def acked_count(self) -> int:
        with self._lock:
            return sum(1 for s in self.sends if s.outcome == "ok")

    def write_jsonl(self, path: Path) -> None:
        with self._lock:
            rows: list[dict[str, Any]] = [{"type": "start", "wall0": self.wall0}]
            rows += [{"type": "fault", **asdict(f)} for f in self.faults]
            rows += [{"type": "send", **asdict(s)} for s in self.sends]
            rows += [{"type": "commit", **asdict(c)} for c in self.commits]
            rows += [{"type": "note", "t": t, "text": text} for t, text in self.notes]
        with open(path, "w") as out:
            for row in rows:
                out.write(json.dumps(row, separators=(",", ":")) + "\n")
