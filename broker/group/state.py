"""The states of a classic consumer group and the legal moves between them.

Kafka's ``GroupState`` (``GroupMetadata.scala``), same names as ``DescribeGroups`` and
``ListGroups`` report them::

    Empty ----------------> PreparingRebalance <-------------+
      ^                      |        ^                      |
      |  (join completes     |        | (member joins/leaves |
      |   with no members)   v        |  or fails)           |
      +------------------ CompletingRebalance --(leader's SyncGroup stored)--> Stable
    any state -> Dead (group deleted, unloaded, or expired with no offsets)
"""

from __future__ import annotations

import enum


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    @classmethod
    def parse(cls, name: str) -> GroupState | None:
        """The state named ``name`` (case-insensitive, as ListGroups' filter), else None."""
        lowered = name.lower()
        for state in cls:
            if state.value.lower() == lowered:
                return state
        return None


# Kafka's validPreviousStates: a transition to the key is legal only from these states.
VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(
        {
            GroupState.STABLE,
            GroupState.PREPARING_REBALANCE,
            GroupState.COMPLETING_REBALANCE,
            GroupState.EMPTY,
            GroupState.DEAD,
        }
    ),
}


class IllegalStateTransition(RuntimeError):
    """A transition the state machine forbids: a coordinator bug, never client input."""
