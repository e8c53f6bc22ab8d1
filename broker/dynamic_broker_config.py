"""Dynamic broker configs in a cluster (Kafka's ``DynamicBrokerConfig`` in ZooKeeper mode),
for the properties replica throttling reads: ``leader.replication.throttled.rate`` and
``follower.replication.throttled.rate`` (Kafka's ``DynamicReplicationConfig``; bytes/s,
LONG, at least 0; absent: the server.properties value), and
``replica.alter.log.dirs.io.max.bytes.per.second`` (accepted, without effect here).

Where they live: ``/config/brokers/<id>`` (``controller.topic_store.BrokerConfigStore``),
written by whichever broker receives AlterConfigs / IncrementalAlterConfigs for resource
BROKER ``<id>`` (Kafka's admin client sends it to that broker), followed by a
``/config/changes`` notification that every broker reads; the broker it names re-reads its
znode and applies the values at once. A broker reads its znode at start-up too. Any other
property in such a request is refused (INVALID_CONFIG ``Cannot update these configs
dynamically``), as is every property on a single node (no ZooKeeper, no replication) and
the cluster-wide defaults (``<default>``), which this broker does not keep.

Thread-safety: the broker's event loop only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Final

from broker.config import BrokerConfig
from broker.replication_quota import FOLLOWER_RATE, LEADER_RATE
from controller.topic_store import BrokerConfigStore, TopicStoreError
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)

# Kafka's DynamicReplicationConfig. The third is kept (kafka-reassign-partitions --verify
# deletes it with the others) but has no effect: replicas do not move between log dirs here.
LOG_DIRS_RATE: Final = "replica.alter.log.dirs.io.max.bytes.per.second"
DYNAMIC_PROPERTIES: Final = frozenset({LEADER_RATE, FOLLOWER_RATE, LOG_DIRS_RATE})
LONG_MAX: Final = 2**63 - 1

# What the broker does with its effective dynamic values: name -> value (every property of
# DYNAMIC_PROPERTIES, the static value where no dynamic one is set).
Apply = Callable[[Mapping[str, int]], None]


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
        text = value.strip()
        try:
            number = int(text)
        except ValueError:
            raise DynamicConfigError(
                ErrorCode.INVALID_CONFIG,
                f"Invalid value {value} for configuration {name}: Not a number of type LONG"
            ) from None
        if not 0 <= number <= LONG_MAX:
            raise DynamicConfigError(
                ErrorCode.INVALID_CONFIG,
                f"Invalid value {value} for configuration {name}: Value must be at least 0")
        clean[name] = str(number)
    return clean


class DynamicBrokerConfig:
    """This broker's dynamic configs: what the store holds for it, applied (see the module
    docstring)."""

    def __init__(self, config: BrokerConfig, store: BrokerConfigStore, apply: Apply) -> None:
        self.config = config
        self._store = store
        self._apply = apply
        self.overrides: dict[str, str] = {}
        self._reloading: asyncio.Task[None] | None = None
        self._dirty = False

    def effective(self) -> dict[str, int]:
        """Every dynamic property's value now: its override, else the static value."""
        return {name: int(self.overrides[name]) if name in self.overrides
                else self.config.get_int(name) for name in sorted(DYNAMIC_PROPERTIES)}

    async def start(self) -> None:
        """Read this broker's dynamic configs, apply them, and follow their changes."""
        self._store.watch_broker_configs(self._changed)
        await self._reload()

    async def alter(self, overrides: Mapping[str, str | None], *, validate_only: bool) -> None:
        """Validate the new whole set and, unless ``validate_only``, store it (every broker
        hears of it; this one applies it when the notification arrives)."""
        clean = validate(overrides)
        if validate_only:
            return
        try:
            await self._store.set_broker_configs(self.config.broker_id, clean)
        except TopicStoreError as exc:
            raise DynamicConfigError(exc.error_code, exc.message) from None
        log.info("dynamic configs of broker %d set to %s", self.config.broker_id, clean)

    def _changed(self, broker_id: int) -> None:
        if broker_id != self.config.broker_id:
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
        stored = await self._store.broker_configs(self.config.broker_id)
        others = sorted(k for k in stored if k not in DYNAMIC_PROPERTIES)
        if others:
            log.warning("ignoring dynamic configs of broker %d this broker does not apply: %s",
                        self.config.broker_id, others)
        try:
            clean = validate({k: v for k, v in stored.items() if k in DYNAMIC_PROPERTIES})
        except DynamicConfigError as exc:
            log.warning("ignoring the dynamic configs of broker %d %s: %s",
                        self.config.broker_id, stored, exc.message)
            return
        if clean != self.overrides:
            log.info("dynamic configs of broker %d now %s (were %s)", self.config.broker_id,
                     clean, self.overrides)
        self.overrides = clean
        self._apply(self.effective())
