"""Delayed joins: the rebalance waits for members to rejoin (Kafka's ``DelayedJoin`` and
``InitialDelayedJoin`` in the rebalance purgatory).

They follow the purgatory's three-method contract (``broker.purgatory.DelayedOperation``:
``try_complete``, ``on_complete``, ``on_expiration``; completed exactly once). ``JoinPurgatory``
watches them per group on the coordinator's ``Timers`` instead of the event loop's clock, so
the group state machine stays sans-IO and is tested on a manual clock.

- ``DelayedJoin(delay = rebalance timeout)``: completes as soon as every known member has
  rejoined (and no pending member is outstanding), else when the rebalance timeout runs out.
- ``InitialDelayedJoin``: the first rebalance of an Empty group waits
  ``group.initial.rebalance.delay.ms``, again each time a new member arrives in that window,
  never longer than the rebalance timeout in total.
"""

from __future__ import annotations

from typing import Protocol

from broker.group.metadata import GroupMetadata
from broker.group.timers import TimerHandle, Timers
from broker.purgatory import DelayedOperation, complete_ready


class Rebalancer(Protocol):
    """The coordinator's side of a delayed join (``broker.group.coordinator``)."""

    def can_complete_join(self, group: GroupMetadata) -> bool: ...
    def on_complete_join(self, group: GroupMetadata) -> None: ...


class DelayedJoin(DelayedOperation):
    def __init__(self, coordinator: Rebalancer, group: GroupMetadata, delay_ms: int) -> None:
        super().__init__(max(delay_ms, 0))
        self.coordinator = coordinator
        self.group = group

    def try_complete(self) -> bool:
        return self.coordinator.can_complete_join(self.group)

    def on_complete(self) -> None:
        self.coordinator.on_complete_join(self.group)


class InitialDelayedJoin(DelayedJoin):
    def __init__(
        self,
        coordinator: Rebalancer,
        purgatory: JoinPurgatory,
        group: GroupMetadata,
        configured_delay_ms: int,
        delay_ms: int,
        remaining_ms: int,
    ) -> None:
        super().__init__(coordinator, group, delay_ms)
        self.purgatory = purgatory
        self.configured_delay_ms = configured_delay_ms
        self.remaining_ms = remaining_ms

    def try_complete(self) -> bool:
        return False  # only the timer ends the initial delay

    def on_complete(self) -> None:
        group = self.group
        if group.new_member_added and self.remaining_ms != 0:
            group.new_member_added = False
            delay_ms = min(self.configured_delay_ms, self.remaining_ms)
            remaining_ms = max(self.remaining_ms - self.delay_ms, 0)
            self.purgatory.try_complete_else_watch(
                InitialDelayedJoin(
                    self.coordinator, self.purgatory, group, self.configured_delay_ms,
                    delay_ms, remaining_ms,
                )
            )
        else:
            super().on_complete()


class JoinPurgatory:
    """At most a few delayed joins per group, each expiring on ``Timers``."""

    def __init__(self, timers: Timers) -> None:
        self._timers = timers
        self._watched: dict[str, dict[DelayedJoin, TimerHandle]] = {}

    def __len__(self) -> int:
        return sum(len(ops) for ops in self._watched.values())

    def try_complete_else_watch(self, op: DelayedJoin) -> bool:
        if op.try_complete():
            return op.force_complete()
        group_id = op.group.group_id
        handle = self._timers.call_later(op.delay_ms, lambda: self._expire(op))
        self._watched.setdefault(group_id, {})[op] = handle
        return False

    def check_and_complete(self, group_id: str) -> int:
        ops = self._watched.get(group_id)
        if not ops:
            return 0
        return complete_ready(ops, self._unwatch)  # bounded: at most one live join per group

    def _expire(self, op: DelayedJoin) -> None:
        if self._unwatch(op, cancel=False):
            op.force_complete(expired=True)

    def _unwatch(self, op: DelayedJoin, *, cancel: bool = True) -> bool:
        group_id = op.group.group_id
        ops = self._watched.get(group_id)
        if ops is None or op not in ops:
            return False
        handle = ops.pop(op)
        if cancel:
            handle.cancel()
        if not ops:
            del self._watched[group_id]
        return True

    def cancel_all(self) -> None:
        for ops in self._watched.values():
            for handle in ops.values():
                handle.cancel()
        self._watched.clear()
