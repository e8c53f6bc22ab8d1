"""Dynamic broker configs (Kafka's ``DynamicBrokerConfig`` in ZooKeeper mode) for the
properties this broker can change while running:

- the replica throttling rates ``leader.replication.throttled.rate`` and
  ``follower.replication.throttled.rate`` (Kafka's ``DynamicReplicationConfig``; bytes/s,
  LONG, at least 0), and ``replica.alter.log.dirs.io.max.bytes.per.second`` (accepted,
  without effect here: replicas do not move between log dirs);
- ``num.io.threads`` (Kafka's ``DynamicThreadPool``; INT, at least 1, and a change must
  stay within half and double the value in force, as Kafka checks): the number of IO
  worker tasks that take queued requests off the request queue and start their handlers
  (``broker.network.request_channel``), resized at once;
- the broker-level log defaults (Kafka's ``DynamicLogConfig.ReconfigurableConfigs``: the
  highest-priority broker synonym of every topic config, ``log.retention.ms``,
  ``log.segment.bytes``, ``log.cleanup.policy``, ``min.insync.replicas``, ...; not
  ``log.message.format.version``, nor the lower-priority synonyms such as
  ``log.retention.hours``), validated as the topic config they stand for, and applied to
  every existing log whose topic does not override that config (``apply_log``; the
  precedence is topic override > this broker's dynamic value > the cluster default >
  server.properties > Kafka's default, ``broker.log_configs``);
- the log cleaner's settings (Kafka's ``LogCleaner.ReconfigurableConfigs``:
  ``log.cleaner.threads``, ``log.cleaner.dedupe.buffer.size``,
  ``log.cleaner.io.buffer.load.factor``, ``log.cleaner.io.buffer.size``,
  ``log.cleaner.io.max.bytes.per.second``, ``log.cleaner.backoff.ms``, and
  ``message.max.bytes`` among the log defaults), each value checked as server.properties
  checks it, the whole as the running cleaner accepts it (``CleanerHooks.check``: Kafka's
  rules and messages, ``broker.log_cleaning``); a change restarts the cleaner's threads
  and workers with the new settings (``CleanerHooks.apply``), as Kafka restarts its
  cleaner threads.

Two levels, each stored as a whole set (``controller.topic_store.BrokerConfigStore``):
this broker's own (entity ``<id>``, AlterConfigs resource BROKER ``"<id>"``, source
DYNAMIC_BROKER_CONFIG) and the cluster-wide defaults every broker applies (entity
``<default>``, resource BROKER ``""``, source DYNAMIC_DEFAULT_BROKER_CONFIG). A property's
value is the first of: this broker's dynamic value, the cluster default, the
server.properties value, Kafka's default. In a cluster they live in
``/config/brokers/<id>`` and ``/config/brokers/<default>``, written by whichever broker
receives the request, followed by a ``/config/changes`` notification that every broker
reads; a broker re-reads both levels when one of its own or the defaults changed and
applies the result. On a single node a file in the log dir holds them
(``controller.local_broker_configs``) and the write itself notifies. A broker reads both at
start-up too. Any other property in an alter request is refused (INVALID_CONFIG ``Cannot
update these configs dynamically``); a stored value that is not valid is ignored with a
warning (Kafka drops invalid dynamic configs the same way).

Thread-safety: the broker's event loop only.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Mapping
from typing import Final, Protocol

from broker.config import PROPERTIES, BrokerConfig, PropType
from broker.replication_quota import FOLLOWER_RATE, LEADER_RATE
from controller.topic_store import DEFAULT_BROKER_ENTITY, BrokerConfigStore, TopicStoreError
from protocol.errors import ErrorCode
from storage.config import TOPIC_CONFIGS, TopicConfigDef, parse
from storage.errors import LogConfigError

log = logging.getLogger(__name__)

LOG_DIRS_RATE: Final = "replica.alter.log.dirs.io.max.bytes.per.second"
NUM_IO_THREADS: Final = "num.io.threads"
LONG_MAX: Final = 2**63 - 1
INT_MAX: Final = 2**31 - 1
# name -> (Kafka's type name, minimum, maximum)
_TYPES: Final[dict[str, tuple[str, int, int]]] = {
    LEADER_RATE: ("LONG", 0, LONG_MAX),
    FOLLOWER_RATE: ("LONG", 0, LONG_MAX),
    LOG_DIRS_RATE: ("LONG", 0, LONG_MAX),
    NUM_IO_THREADS: ("INT", 1, INT_MAX),
}
NUMERIC_PROPERTIES: Final = frozenset(_TYPES)
THREAD_COUNTS: Final = frozenset({NUM_IO_THREADS})

# Kafka's DynamicLogConfig.ReconfigurableConfigs (3.9): ServerTopicConfigSynonyms' first
# broker synonym of each topic config, message.format.version's excepted.
LOG_PROPERTIES: Final = frozenset({
    "log.segment.bytes", "log.roll.ms", "log.roll.jitter.ms", "log.index.size.max.bytes",
    "log.flush.interval.messages", "log.flush.interval.ms", "log.retention.bytes",
    "log.retention.ms", "message.max.bytes", "log.index.interval.bytes",
    "log.cleaner.delete.retention.ms", "log.cleaner.min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms", "log.segment.delete.delay.ms",
    "log.cleaner.min.cleanable.ratio", "log.cleanup.policy", "unclean.leader.election.enable",
    "min.insync.replicas", "compression.type", "compression.gzip.level",
    "compression.lz4.level", "compression.zstd.level", "log.preallocate",
    "log.message.timestamp.type", "log.message.timestamp.difference.max.ms",
    "log.message.timestamp.before.max.ms", "log.message.timestamp.after.max.ms",
    "log.message.downconversion.enable", "log.local.retention.ms", "log.local.retention.bytes",
})
# Each one checked as the topic config it supplies (type and validator), under its own name.
_LOG_DEFS: Final[dict[str, TopicConfigDef]] = {
    d.synonyms[0].name: dataclasses.replace(d, name=d.synonyms[0].name)
    for d in TOPIC_CONFIGS.values() if d.synonyms and d.synonyms[0].name in LOG_PROPERTIES}
assert set(_LOG_DEFS) == LOG_PROPERTIES, sorted(LOG_PROPERTIES - set(_LOG_DEFS))
# Kafka's LogCleaner.ReconfigurableConfigs (3.9) but message.max.bytes, a log default too.
CLEANER_PROPERTIES: Final = frozenset({
    "log.cleaner.threads", "log.cleaner.dedupe.buffer.size",
    "log.cleaner.io.buffer.load.factor", "log.cleaner.io.buffer.size",
    "log.cleaner.io.max.bytes.per.second", "log.cleaner.backoff.ms",
})
CLEANER_RECONFIGURABLE: Final = CLEANER_PROPERTIES | {"message.max.bytes"}
DYNAMIC_PROPERTIES: Final = NUMERIC_PROPERTIES | LOG_PROPERTIES | CLEANER_PROPERTIES

# What the broker does with its effective numeric dynamic values: name -> value (every
# property of NUMERIC_PROPERTIES, the static value where no dynamic one is set).
Apply = Callable[[Mapping[str, int]], None]
# What it does with the dynamic log defaults: the LOG_PROPERTIES set dynamically, this
# broker's value over the cluster default (the static ones are the log configs' base).
ApplyLog = Callable[[Mapping[str, str]], None]


class CleanerHooks(Protocol):
    """The log cleaner's side (``broker.log_cleaning.CleanerReconfigurer``); both take the
    CLEANER_RECONFIGURABLE properties set dynamically, this broker's value over the
    cluster default."""

    def check(self, dynamic: Mapping[str, str]) -> str | None: ...

    def apply(self, dynamic: Mapping[str, str]) -> None: ...


class DynamicConfigError(Exception):
    """A refused change, with the error code AlterConfigs answers."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


def validate(overrides: Mapping[str, str | None]) -> dict[str, str]:
    """The clean set of dynamic overrides (None values dropped); DynamicConfigError."""
    unknown = sorted(k for k in overrides if k not in DYNAMIC_PROPERTIES)
    if unknown:
        raise DynamicConfigError(ErrorCode.INVALID_CONFIG,
                                 f"Cannot update these configs dynamically: {unknown}")
    clean: dict[str, str] = {}
    for name, value in overrides.items():
        if value is None:
            continue
        if name in LOG_PROPERTIES:
            clean[name] = _valid_log_value(name, value)
            continue
        if name in CLEANER_PROPERTIES:
            clean[name] = _valid_broker_value(name, value)
            continue
        type_name, lowest, highest = _TYPES[name]
        text = value.strip()
        try:
            number = int(text)
        except ValueError:
            raise DynamicConfigError(
                ErrorCode.INVALID_CONFIG,
                f"Invalid value {value} for configuration {name}: Not a number of type "
                f"{type_name}") from None
        if number > highest:
            raise DynamicConfigError(
                ErrorCode.INVALID_CONFIG,
                f"Invalid value {value} for configuration {name}: Not a number of type "
                f"{type_name}")
        if number < lowest:
            raise DynamicConfigError(
                ErrorCode.INVALID_CONFIG,
                f"Invalid value {value} for configuration {name}: Value must be at least "
                f"{lowest}")
        clean[name] = str(number)
    return clean


def _valid_log_value(name: str, value: str) -> str:
    """A dynamic log default, checked as its topic config is (Kafka's messages)."""
    definition = _LOG_DEFS[name]
    try:
        typed = parse(definition, value)
    except LogConfigError as exc:
        raise DynamicConfigError(ErrorCode.INVALID_CONFIG, str(exc)) from None
    complaint = definition.check(typed) if definition.check is not None else None
    if complaint is not None:
        raise DynamicConfigError(ErrorCode.INVALID_CONFIG,
                                 f"Invalid value {value} for configuration {name}: {complaint}")
    return value.strip()


_NUMBER_TYPES: Final = {PropType.INT: ("INT", -INT_MAX - 1, INT_MAX),
                        PropType.LONG: ("LONG", -LONG_MAX - 1, LONG_MAX)}


def _valid_broker_value(name: str, value: str) -> str:
    """A broker property's value, checked as server.properties is (Kafka's ConfigDef
    messages: ``Not a number of type INT``, ``Value must be at least 0``)."""
    prop = PROPERTIES[name]
    text = value.strip()
    typed: int | float
    try:
        if prop.type is PropType.DOUBLE:
            typed = float(text)
        else:
            type_name, lowest, highest = _NUMBER_TYPES[prop.type]
            typed = int(text, 10)
            if not lowest <= typed <= highest:
                raise ValueError(type_name)
    except ValueError:
        raise DynamicConfigError(
            ErrorCode.INVALID_CONFIG, f"Invalid value {value} for configuration {name}: Not a "
            f"number of type {prop.type.name}") from None
    complaint = prop.check(typed) if prop.check is not None else None
    if complaint is not None:
        raise DynamicConfigError(ErrorCode.INVALID_CONFIG,
                                 f"Invalid value {value} for configuration {name}: {complaint}")
    return text


def thread_count_error(name: str, new: int, old: int) -> str | None:
    """Kafka's DynamicThreadPool rule for a changed thread count, None when it holds."""
    if new == old:
        return None
    prefix = f"Dynamic thread count update validation failed for {name}={new}"
    if new < old / 2:
        return f"{prefix}, value should be at least half the current value {old}"
    if new > old * 2:
        return f"{prefix}, value should not be greater than double the current value {old}"
    return None


def _valid_stored(entity: str, stored: Mapping[str, str]) -> dict[str, str]:
    """A stored set, each invalid or unknown property dropped with a warning."""
    clean: dict[str, str] = {}
    for name, value in sorted(stored.items()):
        try:
            clean.update(validate({name: value}))
        except DynamicConfigError as exc:
            log.warning("ignoring dynamic config %s=%s of %s: %s", name, value, entity,
                        exc.message)
    return clean


class DynamicBrokerConfig:
    """This broker's dynamic configs and the cluster-wide defaults, as the store holds them,
    applied (see the module docstring)."""

    def __init__(self, config: BrokerConfig, store: BrokerConfigStore, apply: Apply,
                 apply_log: ApplyLog | None = None, cleaner: CleanerHooks | None = None) -> None:
        self.config = config
        self._store = store
        self._apply = apply
        self._apply_log = apply_log
        self._applied_log: dict[str, str] = {}
        self._cleaner = cleaner
        self._applied_cleaner: dict[str, str] = {}
        self._entity = str(config.broker_id)
        self.overrides: dict[str, str] = {}  # this broker's (DYNAMIC_BROKER_CONFIG)
        self.defaults: dict[str, str] = {}  # the cluster's (DYNAMIC_DEFAULT_BROKER_CONFIG)
        self._applied: dict[str, int] = {}
        self._reloading: asyncio.Task[None] | None = None
        self._dirty = False

    def effective(self, overrides: Mapping[str, str] | None = None,
                  defaults: Mapping[str, str] | None = None) -> dict[str, int]:
        """Every numeric dynamic property's value: this broker's, else the cluster default,
        else the static value (of the given levels, or the current ones)."""
        mine = self.overrides if overrides is None else overrides
        cluster = self.defaults if defaults is None else defaults
        out: dict[str, int] = {}
        for name in sorted(NUMERIC_PROPERTIES):
            if name in mine:
                out[name] = int(mine[name])
            elif name in cluster:
                out[name] = int(cluster[name])
            else:
                out[name] = self.config.get_int(name)
        return out

    def log_defaults(self) -> dict[str, str]:
        """The log defaults set dynamically: this broker's value over the cluster default."""
        out = {n: v for n, v in self.defaults.items() if n in LOG_PROPERTIES}
        out.update((n, v) for n, v in self.overrides.items() if n in LOG_PROPERTIES)
        return out

    def cleaner_values(self, overrides: Mapping[str, str] | None = None,
                       defaults: Mapping[str, str] | None = None) -> dict[str, str]:
        """The log cleaner's settings set dynamically (CLEANER_RECONFIGURABLE): this
        broker's value over the cluster default (of the given levels, or the current)."""
        mine = self.overrides if overrides is None else overrides
        cluster = self.defaults if defaults is None else defaults
        out = {n: v for n, v in cluster.items() if n in CLEANER_RECONFIGURABLE}
        out.update((n, v) for n, v in mine.items() if n in CLEANER_RECONFIGURABLE)
        return out

    async def start(self) -> None:
        """Read both levels, apply them, and follow their changes."""
        self._store.watch_broker_configs(self._changed)
        await self._reload()

    async def alter(self, resource_name: str, overrides: Mapping[str, str | None], *,
                    validate_only: bool) -> None:
        """Validate the new whole set of this broker (``resource_name`` its id) or of the
        cluster defaults (``""``) and, unless ``validate_only``, store it (every broker hears
        of it; this one applies it when the notification arrives)."""
        clean = validate(overrides)
        per_broker = resource_name != ""
        after = (self.effective(clean, None) if per_broker else self.effective(None, clean))
        now = self._applied or self.effective()
        for name in sorted(THREAD_COUNTS):
            error = thread_count_error(name, after[name], now[name])
            if error is not None:
                raise DynamicConfigError(ErrorCode.INVALID_CONFIG, error)
        cleaner = (self.cleaner_values(clean, None) if per_broker
                   else self.cleaner_values(None, clean))
        if self._cleaner is not None and cleaner != self.cleaner_values():
            error = self._cleaner.check(cleaner)
            if error is not None:
                raise DynamicConfigError(ErrorCode.INVALID_CONFIG, error)
        if validate_only:
            return
        entity = self._entity if per_broker else DEFAULT_BROKER_ENTITY
        try:
            await self._store.set_broker_configs(entity, clean)
        except TopicStoreError as exc:
            raise DynamicConfigError(exc.error_code, exc.message) from None
        if per_broker:
            log.info("dynamic configs of broker %d set to %s", self.config.broker_id, clean)
        else:
            log.info("cluster-wide default dynamic broker configs set to %s", clean)

    def _changed(self, entity: str) -> None:
        if entity not in (self._entity, DEFAULT_BROKER_ENTITY):
            return
        if self._reloading is not None and not self._reloading.done():
            self._dirty = True  # one reload in flight at a time; read again after it
            return
        self._reloading = asyncio.get_running_loop().create_task(
            self._reload_until_clean(), name="dynamic-broker-config")

    async def _reload_until_clean(self) -> None:
        for _ in range(100):  # bounded: each turn reads the newest state
            self._dirty = False
            try:
                await self._reload()
            except Exception as exc:  # the store answers again later; the next change retries
                log.warning("reading the dynamic configs of broker %d failed: %s",
                            self.config.broker_id, exc)
                return
            if not self._dirty:
                return

    async def _reload(self) -> None:
        mine = _valid_stored(f"broker {self._entity}",
                             await self._store.broker_configs(self._entity))
        cluster = _valid_stored("the cluster defaults",
                                await self._store.broker_configs(DEFAULT_BROKER_ENTITY))
        if mine != self.overrides:
            log.info("dynamic configs of broker %d now %s (were %s)", self.config.broker_id,
                     mine, self.overrides)
        if cluster != self.defaults:
            log.info("cluster-wide default dynamic broker configs now %s (were %s)", cluster,
                     self.defaults)
        effective = self.effective(mine, cluster)
        for name in sorted(THREAD_COUNTS):
            if not self._applied:
                break
            error = thread_count_error(name, effective[name], self._applied[name])
            if error is not None:  # Kafka skips such a reconfiguration, with an error log
                log.error("not applying %s: %s", name, error)
                effective[name] = self._applied[name]
        self.overrides, self.defaults = mine, cluster
        self._applied = effective
        self._apply(effective)
        log_defaults = self.log_defaults()
        if self._apply_log is not None and log_defaults != self._applied_log:
            self._applied_log = log_defaults
            self._apply_log(log_defaults)
        cleaner = self.cleaner_values()
        if self._cleaner is not None and cleaner != self._applied_cleaner:
            error = self._cleaner.check(cleaner)
            if error is not None:  # as Kafka, which skips the reconfiguration, with an error log
                log.error("not reconfiguring the log cleaner with %s: %s", cleaner, error)
            else:
                self._applied_cleaner = cleaner
                self._cleaner.apply(cleaner)

    def applied(self) -> dict[str, int]:
        """The values in force now."""
        return dict(self._applied)
