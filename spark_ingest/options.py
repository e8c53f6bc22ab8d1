"""The ``minikafka`` source's options, named and checked as Spark's Kafka source does.

Option names are case-insensitive (Spark's options are). Every bad value raises
``SourceError`` whose message starts with the option's name.

- ``kafka.bootstrap.servers`` (required): ``host:port[,host:port...]``.
- exactly one of ``subscribe`` (comma list of topics), ``subscribePattern`` (a Java-style
  regex, matched against the whole topic name), ``assign`` (JSON ``{"t": [0, 1]}``).
- ``startingOffsets``: ``earliest``, ``latest`` or JSON ``{"t": {"0": 23, "1": -2}}``
  (-2 earliest, -1 latest); default ``latest`` for streams, ``earliest`` for batch reads
  (where ``latest`` is refused, as in Spark).
- ``startingTimestamp`` (ms, all partitions) or ``startingOffsetsByTimestamp`` (JSON of ms)
  win over ``startingOffsets``; the offset of the first record at or after the timestamp;
  where there is none, ``startingOffsetsByTimestampStrategy`` = ``error`` (default) fails
  and ``latest`` starts at the end.
- ``endingOffsets`` (batch only): ``latest`` (default) or JSON (``-2`` refused);
  ``endingTimestamp`` (batch only, ms).
- ``maxOffsetsPerTrigger`` (streams: records per micro-batch, shared by backlog),
  ``minPartitions`` (split large ranges into more Spark partitions),
  ``includeHeaders`` (false), ``failOnDataLoss`` (true).
- ``kafka.request.timeout.ms`` (30000), ``kafka.max.partition.fetch.bytes`` (1048576),
  ``kafka.fetch.max.wait.ms`` (500): the executors' Fetch settings. Other ``kafka.*``
  options are accepted and ignored (Spark passes them to its consumer).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from spark_ingest.offsets import (
    EARLIEST,
    LATEST,
    MAX_PARTITIONS_PER_TOPIC,
    PartitionOffsets,
    SourceError,
    TopicPartition,
    offsets_from_json,
)

BOOTSTRAP: Final = "kafka.bootstrap.servers"
MAX_TOPICS: Final = 10_000


@dataclass(frozen=True, slots=True)
class Subscribe:
    topics: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SubscribePattern:
    pattern: str

    def matches(self, topic: str) -> bool:
        return re.fullmatch(self.pattern, topic) is not None


@dataclass(frozen=True, slots=True)
class Assign:
    partitions: tuple[TopicPartition, ...]


Subscription = Subscribe | SubscribePattern | Assign


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """Where to start or end: ``kind`` earliest/latest, specific offsets, or timestamps (ms)."""

    kind: Literal["earliest", "latest", "offsets", "timestamp", "timestamps"]
    option: str
    offsets: tuple[tuple[TopicPartition, int], ...] = ()
    timestamp_ms: int = -1

    @property
    def offsets_map(self) -> PartitionOffsets:
        return dict(self.offsets)


@dataclass(frozen=True, slots=True)
class SourceOptions:
    bootstrap: str
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    timestamp_strategy: Literal["error", "latest"]
    max_offsets_per_trigger: int | None
    min_partitions: int | None
    include_headers: bool
    fail_on_data_loss: bool
    request_timeout_ms: int
    max_partition_fetch_bytes: int
    fetch_max_wait_ms: int


def _bool(opts: Mapping[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise SourceError(f"{name}: expected true or false, got {raw!r}")
    return value == "true"


def _positive(opts: Mapping[str, str], name: str, default: int | None, *, low: int = 1) -> int | None:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise SourceError(f"{name}: expected an integer, got {raw!r}") from None
    if value < low:
        raise SourceError(f"{name}: must be at least {low}, got {value}")
    return value


def _required_int(opts: Mapping[str, str], name: str, default: int, *, low: int = 1) -> int:
    value = _positive(opts, name, default, low=low)
    assert value is not None
    return value


def _bootstrap(opts: Mapping[str, str]) -> str:
    raw = opts.get(BOOTSTRAP)
    if raw is None or not raw.strip():
        raise SourceError(f"{BOOTSTRAP}: option must be specified for the minikafka source")
    for server in raw.split(","):
        host, sep, port = server.strip().rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise SourceError(f"{BOOTSTRAP}: {server.strip()!r} is not host:port")
    return raw.strip()


def _subscription(opts: Mapping[str, str]) -> Subscription:
    given = [name for name in ("subscribe", "subscribePattern", "assign") if name.lower() in opts]
    if len(given) != 1:
        raise SourceError(
            "subscribe/subscribePattern/assign: exactly one of these options must be specified"
            + (f" (got {', '.join(given)})" if given else "")
        )
    (name,) = given
    raw = opts[name.lower()].strip()
    if name == "subscribe":
        topics = tuple(t.strip() for t in raw.split(",") if t.strip())
        if not topics or len(topics) > MAX_TOPICS:
            raise SourceError(f"subscribe: expected a comma-separated list of topics, got {raw!r}")
        return Subscribe(topics)
    if name == "subscribePattern":
        if not raw:
            raise SourceError("subscribePattern: pattern to subscribe is empty")
        try:
            re.compile(raw)
        except re.error as exc:
            raise SourceError(f"subscribePattern: bad pattern {raw!r}: {exc}") from None
        return SubscribePattern(raw)
    return Assign(_assign(raw))


def _assign(raw: str) -> tuple[TopicPartition, ...]:
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise SourceError(
            f'assign: malformed JSON ({exc.msg} at char {exc.pos}); expected {{"topicA": [0, 1]}}'
        ) from None
    if not isinstance(data, dict) or not data:
        raise SourceError(f'assign: expected a JSON object like {{"topicA": [0, 1]}}, got {raw!r}')
    out: list[TopicPartition] = []
    for topic, parts in data.items():
        if not topic or not isinstance(parts, list) or not parts:
            raise SourceError(f"assign: topic {topic!r} needs a non-empty list of partitions")
        for p in parts:
            if isinstance(p, bool) or not isinstance(p, int) or not 0 <= p < MAX_PARTITIONS_PER_TOPIC:
                raise SourceError(f"assign: {p!r} is not a partition number of topic {topic!r}")
            out.append(TopicPartition(topic, p))
    return tuple(sorted(set(out)))


def _starting(opts: Mapping[str, str], streaming: bool) -> OffsetSpec:
    ts = _positive(opts, "startingTimestamp", None, low=0)
    if ts is not None:
        return OffsetSpec("timestamp", "startingTimestamp", timestamp_ms=ts)
    by_ts = opts.get("startingoffsetsbytimestamp")
    if by_ts is not None:
        offsets = offsets_from_json(by_ts, "startingOffsetsByTimestamp", allow_special=False)
        return OffsetSpec("timestamps", "startingOffsetsByTimestamp", tuple(sorted(offsets.items())))
    raw = opts.get("startingoffsets")
    default = "latest" if streaming else "earliest"
    value = (raw if raw is not None else default).strip()
    if value.lower() == "earliest":
        return OffsetSpec("earliest", "startingOffsets")
    if value.lower() == "latest":
        if not streaming:
            raise SourceError("startingOffsets: 'latest' is not allowed for batch queries")
        return OffsetSpec("latest", "startingOffsets")
    if not value.startswith("{"):
        allowed = "earliest, latest" if streaming else "earliest"
        raise SourceError(f"startingOffsets: expected {allowed} or a JSON object like "
                          f'{{"topic": {{"0": 23, "1": -2}}}}, got {value!r}')
    offsets = offsets_from_json(value, "startingOffsets")
    if not streaming and LATEST in offsets.values():
        raise SourceError("startingOffsets: -1 (latest) is not allowed for batch queries")
    return OffsetSpec("offsets", "startingOffsets", tuple(sorted(offsets.items())))


def _ending(opts: Mapping[str, str], streaming: bool) -> OffsetSpec:
    named = [n for n in ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp") if n.lower() in opts]
    if streaming and named:
        raise SourceError(f"{named[0]}: ending offsets are not valid in streaming queries")
    ts = _positive(opts, "endingTimestamp", None, low=0)
    if ts is not None:
        return OffsetSpec("timestamp", "endingTimestamp", timestamp_ms=ts)
    raw = opts.get("endingoffsets", "latest").strip()
    if raw.lower() == "latest":
        return OffsetSpec("latest", "endingOffsets")
    if raw.lower() == "earliest":
        raise SourceError("endingOffsets: 'earliest' is not allowed for batch queries")
    if not raw.startswith("{"):
        raise SourceError('endingOffsets: expected latest or a JSON object like {"topic": {"0": 23, "1": -1}}, '
                          f"got {raw!r}")
    offsets = offsets_from_json(raw, "endingOffsets")
    if EARLIEST in offsets.values():
        raise SourceError("endingOffsets: -2 (earliest) is not allowed for batch queries")
    return OffsetSpec("offsets", "endingOffsets", tuple(sorted(offsets.items())))


def parse_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """Check every option and return them typed; ``SourceError`` names the first bad one."""
    opts = {str(k).lower(): str(v) for k, v in options.items()}
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise SourceError(f"startingOffsetsByTimestampStrategy: expected error or latest, got {strategy!r}")
    max_per_trigger = _positive(opts, "maxOffsetsPerTrigger", None)
    if max_per_trigger is not None and not streaming:
        max_per_trigger = None  # Spark ignores it for batch reads
    return SourceOptions(
        bootstrap=_bootstrap(opts),
        subscription=_subscription(opts),
        starting=_starting(opts, streaming),
        ending=_ending(opts, streaming),
        timestamp_strategy="latest" if strategy == "latest" else "error",
        max_offsets_per_trigger=max_per_trigger,
        min_partitions=_positive(opts, "minPartitions", None),
        include_headers=_bool(opts, "includeHeaders", False),
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        request_timeout_ms=_required_int(opts, "kafka.request.timeout.ms", 30_000),
        max_partition_fetch_bytes=_required_int(opts, "kafka.max.partition.fetch.bytes", 1_048_576),
        fetch_max_wait_ms=_required_int(opts, "kafka.fetch.max.wait.ms", 500, low=0),
    )
