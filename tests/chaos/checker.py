"""The checker: the history of a run against what every replica holds at its end.

Pure functions (no I/O): ``check(history, replicas, final_leaders, writers)``.

For each partition the *reference* is the replica of its last known leader (else the one
with the highest high watermark); its records below the high watermark are what a consumer
can read. Against it:

- **acknowledged but lost**: a send with outcome ``ok`` whose record is not in the
  reference's committed records (also said: which other replicas hold it, if any);
- **duplicates**: a writer's record at more than one offset under one producer id and epoch
  (goal 0 for idempotent writers); copies under different epochs (the client resent after
  bumping its epoch) are reported only;
- **order violations**: two acknowledged records of one writer in one partition whose
  offsets are in the opposite order of their sends (goal 0 for idempotent writers);
- **offset mismatches**: an acknowledged record found, but not at the offset the client was
  told;
- **replica divergence**: any replica whose records below min(its HW, the reference's HW)
  differ from the reference's (offset, writer, sequence);
- **committed offsets moving backwards**: an offset the group's observer read lower than one
  it read before, or lower than a commit acknowledged to a consumer before it asked, and
  never read back at that value or above afterwards (the commit is gone); when a later read
  is back at it or above, the low read was a **stale read** (a deposed group coordinator
  answering OffsetFetch from its cache until it learns it lost the partition: Apache Kafka
  does it too), reported but not failing;
- **unavailability** per fault: the longest stretch, from the injection to the next fault
  (or the end), in which some partition of the acks=all workloads had no acknowledged
  produce (the gaps of the busiest partitions bound its resolution: see ``baseline_gap_s``).

- **not recovered** (``check_recovery``): a fault after which the cluster was not whole
  (every broker running and registered, every partition led with its full ISR) within the
  recovery bound after healing, or not whole after the final heal; each says what was
  missing at the bound.

Whether a finding fails the run: acknowledged loss, duplicates and order violations of the
acks=all idempotent writers, divergence, backwards offsets (not stale reads) and faults not
recovered do; the acks=1 writer's losses are the documented difference and only reported.
"""

from __future__ import annotations

import itertools
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from tests.chaos.history import Commit, FaultEvent, History, Send
from tests.chaos.replicas import ReplicaLog, StoredRecord

Partition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class WriterSpec:
    name: str
    acks: int
    idempotent: bool

    @property
    def strict(self) -> bool:
        """Held to no loss, no duplicate, no reordering."""
        return self.acks == -1 and self.idempotent


@dataclass(slots=True)
class WriterFigures:
    spec: WriterSpec
    sent: int = 0
    acked: int = 0
    failed: int = 0
    unknown: int = 0
    lost: int = 0
    duplicates: int = 0
    order_violations: int = 0
    offset_mismatches: int = 0
    failed_present: int = 0  # failed sends whose record was written anyway (allowed)
    unknown_present: int = 0
    instances: int = 0  # producer instances (a new one after each fatal client error)


@dataclass(frozen=True, slots=True)
class Finding:
    kind: str  # lost | duplicate | order | offset_mismatch | divergence | offsets_backwards
    # | offsets_stale_read
    message: str
    fails: bool  # counts against the run
    t: float | None = None  # the history time it concerns (for log excerpts)
    topic: str | None = None
    partition: int | None = None
    t_ack: float | None = None  # lost records: when the client was told it was stored


@dataclass(frozen=True, slots=True)
class FaultFigures:
    index: int
    kind: str
    target: str
    t_start: float
    unavailable_s: float
    recovered: bool


@dataclass(slots=True)
class CheckResult:
    writers: dict[str, WriterFigures]
    findings: list[Finding]
    faults: list[FaultFigures]
    baseline_gap_s: float  # the longest produce gap before the first fault
    replica_notes: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return any(f.fails for f in self.findings)

    def count(self, kind: str, *, strict_only: bool = True) -> int:
        return sum(1 for f in self.findings if f.kind == kind and (f.fails or not strict_only))

    def by_kind(self) -> dict[str, list[FaultFigures]]:
        kinds: dict[str, list[FaultFigures]] = defaultdict(list)
        for fault in self.faults:
            kinds[fault.kind].append(fault)
        return dict(kinds)


def _fault_around(faults: Sequence[FaultEvent], t: float) -> str:
    before = [f for f in faults if f.t_start <= t]
    after = [f for f in faults if f.t_start > t]
    parts = []
    if before:
        f = before[-1]
        parts.append(f"last fault before: #{f.index} {f.kind} on {f.target} at {f.t_start:.1f} s")
    if after:
        f = after[0]
        parts.append(f"next fault: #{f.index} {f.kind} on {f.target} at {f.t_start:.1f} s")
    return "; ".join(parts) or "no fault injected"


def _reference(replicas: Sequence[ReplicaLog], leader: int | None) -> ReplicaLog:
    for replica in replicas:
        if replica.broker_id == leader:
            return replica
    return max(replicas, key=lambda r: (r.high_watermark if r.high_watermark is not None
                                        else r.log_end_offset, r.log_end_offset))


def _key(record: StoredRecord) -> tuple[int, str | None, int]:
    return record.offset, record.writer, record.seq


def _divergence(ref: ReplicaLog, other: ReplicaLog) -> str | None:
    bounds = [r.high_watermark if r.high_watermark is not None else r.log_end_offset
              for r in (ref, other)]
    limit = min(bounds)
    mine = [_key(r) for r in ref.records if r.offset < limit]
    theirs = [_key(r) for r in other.records if r.offset < limit]
    if mine == theirs:
        return None
    for a, b in zip(mine, theirs, strict=False):
        if a != b:
            return (f"first difference below offset {limit}: broker {ref.broker_id} has "
                    f"{a}, broker {other.broker_id} has {b}")
    return (f"below offset {limit}: broker {ref.broker_id} has {len(mine)} records, broker "
            f"{other.broker_id} has {len(theirs)}")


def _check_partition(tp: Partition, replicas: Sequence[ReplicaLog], leader: int | None,
                     sends: Sequence[Send], specs: Mapping[str, WriterSpec],
                     figures: Mapping[str, WriterFigures], faults: Sequence[FaultEvent],
                     findings: list[Finding]) -> None:
    topic, partition = tp
    ref = _reference(replicas, leader)
    committed: dict[tuple[str, int], list[int]] = defaultdict(list)
    producer_of: dict[int, tuple[int, int]] = {}  # offset -> (producer id, producer epoch)
    for record in ref.committed():
        if record.writer is not None:
            committed[(record.writer, record.seq)].append(record.offset)
            producer_of[record.offset] = (record.producer_id, record.producer_epoch)
    anywhere: dict[tuple[str, int], list[int]] = defaultdict(list)
    for replica in replicas:
        for record in replica.records:
            if record.writer is not None:
                anywhere[(record.writer, record.seq)].append(replica.broker_id)

    for other in replicas:
        if other is not ref:
            diff = _divergence(ref, other)
            if diff is not None:
                findings.append(Finding("divergence", f"{topic}-{partition}: replicas differ "
                                        f"below the high watermark: {diff}", True,
                                        topic=topic, partition=partition))

    for (writer, seq), offsets in committed.items():
        if len(offsets) > 1 and writer in figures:
            # The broker's idempotence covers one producer id and epoch: copies written under
            # different epochs are the client resending after it bumped its epoch (librdkafka
            # does after an OUT_OF_ORDER_SEQUENCE_NUMBER that only followed an earlier failed
            # request, confluentinc/librdkafka#4953), which no broker can tell apart; they
            # are reported, and only copies under one producer epoch fail the run.
            producers = [producer_of[o] for o in offsets]
            same_epoch = len(producers) - len(set(producers))
            spec = specs[writer]
            figures[writer].duplicates += same_epoch
            if same_epoch:
                findings.append(Finding(
                    "duplicate", f"{topic}-{partition}: {writer}:{seq} at offsets {offsets}",
                    spec.strict, topic=topic, partition=partition))
            else:
                epochs = sorted({epoch for _, epoch in producers})
                findings.append(Finding(
                    "duplicate", f"{topic}-{partition}: {writer}:{seq} at offsets {offsets} "
                    f"under producer epochs {epochs}: resent by the client after an epoch "
                    f"bump", False, topic=topic, partition=partition))

    acked_by_writer: dict[str, list[tuple[int, int]]] = defaultdict(list)  # (seq, offset)
    for send in sends:
        fig = figures[send.writer]
        offsets = committed.get((send.writer, send.seq), [])
        if send.outcome != "ok":
            if offsets:
                if send.outcome == "fail":
                    fig.failed_present += 1
                else:
                    fig.unknown_present += 1
            continue
        if not offsets:
            fig.lost += 1
            holders = sorted(set(anywhere.get((send.writer, send.seq), [])))
            where = (f"held by broker(s) {holders} but not below the reference's HW"
                     if holders else "on no replica")
            t_done = send.t_done if send.t_done is not None else send.t_send
            findings.append(Finding(
                "lost",
                f"{topic}-{partition}: {send.writer}:{send.seq} acknowledged at offset "
                f"{send.offset} (sent {send.t_send:.3f} s, acked {t_done:.3f} s), {where}; "
                f"reference broker {ref.broker_id} (HW {ref.high_watermark}); "
                f"{_fault_around(faults, t_done)}",
                specs[send.writer].acks == -1, t=t_done, topic=topic, partition=partition,
                t_ack=t_done))
            continue
        if send.offset is not None and send.offset >= 0 and send.offset not in offsets:
            fig.offset_mismatches += 1
            findings.append(Finding(
                "offset_mismatch", f"{topic}-{partition}: {send.writer}:{send.seq} acknowledged "
                f"at offset {send.offset}, stored at {offsets}", specs[send.writer].strict,
                t=send.t_done, topic=topic, partition=partition))
        acked_by_writer[send.writer].append((send.seq, offsets[0]))

    for writer, pairs in acked_by_writer.items():
        pairs.sort()
        for (seq_a, off_a), (seq_b, off_b) in itertools.pairwise(pairs):
            if off_b < off_a:
                figures[writer].order_violations += 1
                findings.append(Finding(
                    "order", f"{topic}-{partition}: {writer}:{seq_a} at offset {off_a} but "
                    f"{writer}:{seq_b} (sent later) at offset {off_b}", specs[writer].strict,
                    topic=topic, partition=partition))


def _regression(partition: Partition, seen: Sequence[Commit], highest: Sequence[int], i: int,
                above: int, what: str, faults: Sequence[FaultEvent]) -> Finding:
    """The observer's i-th read is below ``above``: a stale read when a later read is back
    at it or above, else a committed offset gone backwards."""
    topic, number = partition
    obs = seen[i]
    later = highest[i + 1]
    where = _fault_around(faults, obs.t)
    if later >= above:
        back = next(c for c in seen[i + 1:] if c.offset >= above)
        return Finding(
            "offsets_stale_read", f"{topic}-{number}: committed offset read as {obs.offset} "
            f"at {obs.t:.3f} s after {what}; read back at {back.offset} at {back.t:.3f} s "
            f"(a stale read); {where}", False, t=obs.t, topic=topic, partition=number)
    return Finding(
        "offsets_backwards", f"{topic}-{number}: committed offset read as {obs.offset} at "
        f"{obs.t:.3f} s after {what}; never read at {above} or above again (highest later "
        f"read: {later}); {where}", True, t=obs.t, topic=topic, partition=number)


def check_commits(commits: Iterable[Commit], faults: Sequence[FaultEvent]) -> list[Finding]:
    """Committed group offsets that move backwards, and stale reads (see the module
    docstring)."""
    findings: list[Finding] = []
    by_partition: dict[Partition, list[Commit]] = defaultdict(list)
    for commit in commits:
        by_partition[(commit.topic, commit.partition)].append(commit)
    for (topic, partition), items in sorted(by_partition.items()):
        acked = sorted((c for c in items if c.source == "consumer"), key=lambda c: c.t_done)
        seen = sorted((c for c in items if c.source == "observer"), key=lambda c: c.t)
        # highest[i]: the highest offset of the observer's reads from the i-th on
        highest = [-1] * (len(seen) + 1)
        for i in range(len(seen) - 1, -1, -1):
            highest[i] = max(highest[i + 1], seen[i].offset)

        best: Commit | None = None  # the highest offset read by the observer so far
        ack_index = 0
        best_acked: Commit | None = None
        for i, obs in enumerate(seen):
            while ack_index < len(acked) and acked[ack_index].t_done < obs.t:
                if best_acked is None or acked[ack_index].offset > best_acked.offset:
                    best_acked = acked[ack_index]
                ack_index += 1
            if best is not None and best.t_done < obs.t and obs.offset < best.offset:
                findings.append(_regression((topic, partition), seen, highest, i, best.offset,
                                            f"{best.offset} at {best.t:.3f} s", faults))
            if best_acked is not None and obs.offset < best_acked.offset:
                findings.append(_regression(
                    (topic, partition), seen, highest, i, best_acked.offset,
                    f"{best_acked.who} was told {best_acked.offset} was committed at "
                    f"{best_acked.t_done:.3f} s", faults))
            if best is None or obs.offset > best.offset:
                best = obs
    return findings


def _longest_gap(times: Sequence[float], start: float, end: float) -> float:
    """The longest stretch of [start, end] holding none of the sorted ``times``."""
    gap = 0.0
    last = start
    for t in times:
        if t < start:
            continue
        if t > end:
            break
        gap = max(gap, t - last)
        last = t
    return max(gap, end - last)


def unavailability(sends: Sequence[Send], faults: Sequence[FaultEvent], end: float,
                   writers: Iterable[str]) -> tuple[list[FaultFigures], float]:
    """Per fault, the longest window without an acknowledged produce on some partition;
    and the same measure before the first fault (the baseline)."""
    chosen = set(writers)
    acks: dict[Partition, list[float]] = defaultdict(list)
    for send in sends:
        if send.writer in chosen and send.outcome == "ok" and send.t_done is not None:
            acks[(send.topic, send.partition)].append(send.t_done)
    for times in acks.values():
        times.sort()
    first_ack = min((t[0] for t in acks.values() if t), default=0.0)
    first_fault = faults[0].t_start if faults else end
    baseline = max((_longest_gap(t, first_ack, first_fault) for t in acks.values()),
                   default=0.0)
    figures = []
    for i, fault in enumerate(faults):
        window_end = faults[i + 1].t_start if i + 1 < len(faults) else end
        worst = max((_longest_gap(t, fault.t_start, window_end) for t in acks.values()),
                    default=window_end - fault.t_start)
        figures.append(FaultFigures(fault.index, fault.kind, fault.target, fault.t_start,
                                    worst, fault.t_recovered is not None))
    return figures, baseline


def check(history: History, replicas: Iterable[ReplicaLog],
          final_leaders: Mapping[Partition, int | None], writers: Sequence[WriterSpec],
          end: float) -> CheckResult:
    specs = {w.name: w for w in writers}
    figures = {w.name: WriterFigures(w) for w in writers}
    sends = history.snapshot_sends()
    for send in sends:
        fig = figures[send.writer]
        fig.sent += 1
        fig.instances = max(fig.instances, send.instance + 1)
        if send.outcome == "ok":
            fig.acked += 1
        elif send.outcome == "fail":
            fig.failed += 1
        else:
            fig.unknown += 1
    by_partition: dict[Partition, list[ReplicaLog]] = defaultdict(list)
    notes = []
    for replica in replicas:
        by_partition[(replica.topic, replica.partition)].append(replica)
        notes += [f"broker {replica.broker_id} {replica.topic}-{replica.partition}: {p}"
                  for p in replica.problems]
    sends_by_partition: dict[Partition, list[Send]] = defaultdict(list)
    for send in sends:
        sends_by_partition[(send.topic, send.partition)].append(send)
    findings: list[Finding] = []
    faults = list(history.faults)
    for tp in sorted(set(by_partition) | set(sends_by_partition)):
        stored = by_partition.get(tp)
        if not stored:
            acked = sum(1 for s in sends_by_partition[tp] if s.outcome == "ok")
            if acked:
                findings.append(Finding("lost", f"{tp[0]}-{tp[1]}: no replica found on any "
                                        f"broker; {acked} acknowledged records", True,
                                        topic=tp[0], partition=tp[1]))
            continue
        _check_partition(tp, stored, final_leaders.get(tp), sends_by_partition.get(tp, []),
                         specs, figures, faults, findings)
    findings += check_commits(history.commits, faults)
    strict = [w.name for w in writers if w.strict]
    fault_figures, baseline = unavailability(sends, faults, end, strict)
    return CheckResult(figures, findings, fault_figures, baseline, notes)


def check_recovery(faults: Sequence[FaultEvent], final_not_whole: Sequence[str],
                   bound_s: float, end: float) -> list[Finding]:
    """A failing finding for each fault after which the cluster was not whole within
    ``bound_s`` of healing, and one if it was not whole after the final heal (at ``end``)."""
    findings = []
    for fault in faults:
        if fault.t_recovered is not None:
            continue
        healed = fault.t_healed if fault.t_healed is not None else fault.t_start
        why = _reasons(fault.not_whole) or "not said"
        findings.append(Finding(
            "not_recovered", f"fault #{fault.index} {fault.kind} on {fault.target} at "
            f"{fault.t_start:.1f} s (healed at {healed:.1f} s): the cluster was not whole "
            f"{bound_s:g} s after healing: {why}", True, t=fault.t_start))
    if final_not_whole:
        findings.append(Finding(
            "not_recovered", f"the cluster was not whole {bound_s:g} s after the final "
            f"heal: {_reasons(final_not_whole)}", True, t=end))
    return findings


def _reasons(why: Sequence[str], most: int = 10) -> str:
    more = f"; and {len(why) - most} more" if len(why) > most else ""
    return "; ".join(why[:most]) + more


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else 0.0
