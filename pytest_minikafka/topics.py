"""Topics a test asks for: ``["a", "b"]``, ``{"a": 3}`` or
``{"a": {"partitions": 3, "replication_factor": 1, "config": {"cleanup.policy": "compact"}}}``,
created with CreateTopics through the project's client (so it works for a broker in any
process and for a cluster)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

__all__ = ["TopicSpec", "TopicsSpec", "create_topics", "parse_topics"]

TopicsSpec: TypeAlias = "Iterable[str] | Mapping[str, int | Mapping[str, Any]] | None"


@dataclass(frozen=True, slots=True)
class TopicSpec:
    name: str
    partitions: int = -1  # -1: the broker's num.partitions
    replication_factor: int = -1  # -1: the broker's default.replication.factor
    config: dict[str, str] = field(default_factory=dict)


def parse_topics(topics: TopicsSpec) -> list[TopicSpec]:
    if topics is None:
        return []
    if isinstance(topics, str):
        return [TopicSpec(topics)]
    if not isinstance(topics, Mapping):
        return [TopicSpec(str(name)) for name in topics]
    specs = []
    for name, value in topics.items():
        if isinstance(value, int):
            specs.append(TopicSpec(name, value))
            continue
        if not isinstance(value, Mapping):
            raise TypeError(f"topic {name!r}: give a partition count or a mapping, not {value!r}")
        unknown = set(value) - {"partitions", "replication_factor", "config"}
        if unknown:
            raise TypeError(f"topic {name!r}: unknown keys {sorted(unknown)} (partitions, "
                            "replication_factor, config)")
        specs.append(TopicSpec(name, int(value.get("partitions", -1)),
                               int(value.get("replication_factor", -1)),
                               {k: str(v) for k, v in (value.get("config") or {}).items()}))
    return specs


def create_topics(bootstrap: str, topics: TopicsSpec, *, timeout_ms: int = 30_000) -> None:
    specs = parse_topics(topics)
    if not specs:
        return
    from client.sync import SyncClient

    with SyncClient(bootstrap, timeout_ms=timeout_ms) as client:
        for spec in specs:
            client.create_topic(spec.name, spec.partitions, spec.replication_factor, spec.config)
