"""Partition reassignment on the ZooKeeper controller (Kafka's
``KafkaController.onPartitionReassignment``, ZooKeeper mode with AlterPartitionReassignments).

For a partition with original replicas OR and target replicas TR:

1. **Start**: the assignment in ``/brokers/topics/<t>`` becomes RS = TR followed by the
   replicas of OR not in TR, with ``adding_replicas`` = TR - OR and ``removing_replicas`` =
   OR - TR (so a controller elected meanwhile resumes it); the leader epoch is bumped and
   LeaderAndIsr goes to every live replica of RS (new replicas create their logs and
   follow), UpdateMetadata to everyone.
2. **Completion**, once every replica of TR is in the ISR (the leader's AlterPartition
   brings them in as they catch up; checked after every ISR change, at controller failover
   and when a reassignment starts): the leader stays if it is in TR and online, else the
   first online replica of TR in the ISR leads; the ISR keeps only TR's replicas; the
   assignment becomes TR with no adding/removing replicas; LeaderAndIsr (new epoch) to TR's
   live replicas, StopReplica with delete to the removed ones, UpdateMetadata to everyone.

A new request for a partition already moving replaces its target (OR stays the original
replicas; replicas that were being added and are no longer wanted are dropped from the ISR
and deleted). Cancelling (a null target) is a reassignment back to OR. Per partition:
UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT (empty, duplicates, brokers not
alive) or NO_REASSIGNMENT_IN_PROGRESS (cancel with none), with Kafka's messages.

Runs on the controller's event task only (``ZkControllerCore`` builds on it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from controller.core import ControllerCore
from controller.leader_and_isr import LeaderAndIsr
from controller.topic_store import TopicRecord
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition

log = logging.getLogger(__name__)

ReassignmentOutcome = dict[TopicPartition, tuple[ErrorCode, str | None]]


@dataclass(frozen=True, slots=True)
class Reassignment:
    """One partition in motion: the full replica set and what is added and removed."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]

    @property
    def target(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing)

    @property
    def original(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.adding)


@dataclass(frozen=True, slots=True, eq=False)
class ReassignmentsRequested:
    """AlterPartitionReassignments: a target per partition (None: cancel)."""

    targets: Mapping[TopicPartition, tuple[int, ...] | None]
    result: asyncio.Future[ReassignmentOutcome]


@dataclass(frozen=True, slots=True, eq=False)
class ReassignmentsListed:
    """ListPartitionReassignments (None: every partition in motion)."""

    partitions: frozenset[TopicPartition] | None
    result: asyncio.Future[dict[TopicPartition, Reassignment]]


def reassignments_of(topics: Mapping[str, TopicRecord]) -> dict[TopicPartition, Reassignment]:
    out: dict[TopicPartition, Reassignment] = {}
    for name, record in topics.items():
        for p in sorted(set(record.adding) | set(record.removing)):
            out[TopicPartition(name, p)] = Reassignment(
                tuple(record.assignment.get(p, ())), tuple(record.adding.get(p, ())),
                tuple(record.removing.get(p, ())))
    return out


def plan(original: tuple[int, ...], target: tuple[int, ...]) -> Reassignment:
    """Kafka's ReplicaAssignment.fromOriginalAndTarget."""
    replicas = tuple(dict.fromkeys((*target, *original)))
    return Reassignment(replicas, tuple(r for r in target if r not in original),
                        tuple(r for r in original if r not in target))


class ReassignmentCore(ControllerCore):
    """The reassignment steps of ``ZkControllerCore`` (see the module docstring)."""

    async def _write_and_send(self, updates: Mapping[TopicPartition, LeaderAndIsr], *,
                              exclude: Iterable[int] = ()) -> set[TopicPartition]:
        """Write the states, tell the replicas and everyone (``ZkControllerCore``'s)."""
        raise NotImplementedError

    async def _on_reassignments_requested(self, event: ReassignmentsRequested) -> None:
        outcome = await self._reassign(event.targets)
        if not event.result.done():
            event.result.set_result(outcome)

    def _on_reassignments_listed(self, event: ReassignmentsListed) -> None:
        moving = reassignments_of(self.context.topics)
        if event.partitions is not None:
            moving = {tp: r for tp, r in moving.items() if tp in event.partitions}
        if not event.result.done():
            event.result.set_result(moving)

    async def _reassign(self, targets: Mapping[TopicPartition, tuple[int, ...] | None]
                        ) -> ReassignmentOutcome:
        ctx = self.context
        moving = reassignments_of(ctx.topics)
        outcome: ReassignmentOutcome = {}
        started: dict[TopicPartition, tuple[Reassignment, tuple[int, ...]]] = {}
        for tp, target in targets.items():
            record = ctx.topics.get(tp.topic)
            if (record is None or tp.partition not in record.assignment
                    or tp.topic in ctx.topics_to_delete or tp not in ctx.leadership):
                outcome[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                               "The partition does not exist.")
                continue
            current = moving.get(tp)
            original = current.original if current is not None else ctx.replicas(tp)
            if target is None:
                if current is None:
                    outcome[tp] = (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                                   f"Unable to cancel reassignment of {tp}: no reassignment "
                                   "is in progress.")
                    continue
                target = original
            error = self._invalid_target(target)
            if error is not None:
                outcome[tp] = (ErrorCode.INVALID_REPLICA_ASSIGNMENT, error)
                continue
            outcome[tp] = (ErrorCode.NO_ERROR, None)
            if current is None and tuple(target) == ctx.replicas(tp):
                continue  # already so
            previous = current.replicas if current is not None else ctx.replicas(tp)
            started[tp] = (plan(original, tuple(target)), previous)
        if started:
            await self._start_reassignments(started)
            await self._maybe_complete_reassignments(started)
        return outcome

    def _invalid_target(self, target: tuple[int, ...]) -> str | None:
        if not target:
            return "Empty replica list specified in partition reassignment."
        if len(set(target)) != len(target):
            return ("Duplicate replica ids in partition reassignment replica list: "
                    f"{list(target)}")
        if any(r < 0 for r in target):
            return f"Invalid broker id in replica list: {list(target)}"
        dead = [r for r in target if r not in self.context.live_brokers]
        if dead:
            return (f"Replica assignment has brokers that are not alive. Replica list: "
                    f"{list(target)}, live broker list: {sorted(self.context.live_brokers)}")
        return None

    async def _write_records(
            self, changes: Mapping[TopicPartition, Reassignment | tuple[int, ...]]) -> None:
        """Store each changed topic's assignment (a Reassignment: in motion; a tuple: done)."""
        ctx = self.context
        by_topic: dict[str, dict[int, Reassignment | tuple[int, ...]]] = {}
        for tp, change in changes.items():
            by_topic.setdefault(tp.topic, {})[tp.partition] = change
        for topic, parts in by_topic.items():
            record = ctx.topics[topic]
            assignment = dict(record.assignment)
            adding = dict(record.adding)
            removing = dict(record.removing)
            for p, change in parts.items():
                adding.pop(p, None)
                removing.pop(p, None)
                if isinstance(change, Reassignment):
                    assignment[p] = change.replicas
                    if change.adding:
                        adding[p] = change.adding
                    if change.removing:
                        removing[p] = change.removing
                else:
                    assignment[p] = change
            new = replace(record, assignment=assignment, adding=adding, removing=removing)
            await self.store.set_assignment(new)
            ctx.topics[topic] = new

    async def _start_reassignments(
            self, started: Mapping[TopicPartition, tuple[Reassignment, tuple[int, ...]]]
    ) -> None:
        ctx = self.context
        await self._write_records({tp: r for tp, (r, _) in started.items()})
        updates: dict[TopicPartition, LeaderAndIsr] = {}
        dropped: dict[TopicPartition, list[int]] = {}
        for tp, (r, previous) in started.items():
            lai = ctx.leadership[tp].leader_and_isr
            gone = [b for b in previous if b not in r.replicas]
            isr = tuple(b for b in lai.isr if b not in gone) or lai.isr
            updates[tp] = lai.new_leader_and_isr(lai.leader, isr)
            if gone:
                dropped[tp] = gone
            log.info("[Controller id=%d] Reassigning %s: replicas %s -> %s (adding %s, "
                     "removing %s)", self.controller_id, tp, list(r.original), list(r.target),
                     list(r.adding), list(r.removing))
        written = await self._write_and_send(updates)
        self._stop_and_delete({tp: b for tp, b in dropped.items() if tp in written})

    def _stop_and_delete(self, replicas: Mapping[TopicPartition, Iterable[int]]
                         ) -> None:
        ctx = self.context
        for tp, brokers in replicas.items():
            live = [b for b in brokers if b in ctx.live_brokers]
            if live:
                epoch = ctx.leadership[tp].leader_and_isr.leader_epoch
                self._batch.add_stop_replica(live, tp, delete=True, leader_epoch=epoch)
        self._send()

    async def _maybe_complete_reassignments(self, partitions: Iterable[TopicPartition] | None = None
                                            ) -> None:
        ctx = self.context
        moving = reassignments_of(ctx.topics)
        wanted = moving if partitions is None else {
            tp: moving[tp] for tp in partitions if tp in moving}
        done: dict[TopicPartition, tuple[Reassignment, LeaderAndIsr]] = {}
        for tp, r in wanted.items():
            state = ctx.leadership.get(tp)
            if state is None:
                continue
            lai = state.leader_and_isr
            target = r.target
            if not set(target) <= set(lai.isr):
                continue
            if lai.leader in target and ctx.is_replica_online(lai.leader):
                leader = lai.leader
            else:
                candidates = [b for b in target if b in lai.isr and ctx.is_replica_online(b)]
                if not candidates:
                    log.warning("[Controller id=%d] Reassignment of %s waits: no online "
                                "replica of %s in the ISR %s", self.controller_id, tp,
                                list(target), list(lai.isr))
                    continue
                leader = candidates[0]
            done[tp] = (r, lai.new_leader_and_isr(leader, tuple(b for b in lai.isr
                                                                if b in target)))
        if not done:
            return
        await self._write_records({tp: r.target for tp, (r, _) in done.items()})
        written = await self._write_and_send({tp: lai for tp, (_, lai) in done.items()})
        self._stop_and_delete({tp: r.removing for tp, (r, _) in done.items() if tp in written})
        for tp, (r, lai) in done.items():
            log.info("[Controller id=%d] Reassignment of %s completed: replicas %s, leader %d,"
                     " ISR %s", self.controller_id, tp, list(r.target), lai.leader,
                     list(lai.isr))
