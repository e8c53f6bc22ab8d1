"""``LogConfigs``: each topic's ``LogConfig`` as this broker applies it to its logs.

A topic's config is its overrides (kept in the topic store, ``/config/topics/<t>`` in a
cluster) over the broker's ``log.*`` properties -- the dynamic log defaults in force
(``set_dynamic``: this broker's dynamic value over the cluster default,
``broker.dynamic_broker_config``) over server.properties -- over Kafka's defaults
(``broker.topics.log_config_for``). When the dynamic defaults change, every known topic's
config is rebuilt; the caller then hands the new configs to the existing logs. This broker keeps the overrides of every topic it has
heard of: all of them at start-up (``load``), a topic's own when its first partition is
created here (``fetch``), and fresh ones when the store says they changed
(``on_configs_changed``, Kafka's config change notifications), which are then applied to
the topic's hosted logs (``on_change``). ``get`` is the synchronous view storage's
LogManager opens logs with.

Thread-safety: the broker's event loop (``get`` may be called from the log manager's
start-up, before the loop serves requests).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from broker.config import BrokerConfig
from broker.topics import log_config_for
from controller.topic_store import TopicStore
from storage.config import LogConfig
from storage.errors import LogConfigError

log = logging.getLogger(__name__)


class LogConfigs:
    def __init__(self, broker_config: BrokerConfig, store: TopicStore) -> None:
        self._broker_config = broker_config
        self._store = store
        self._overrides: dict[str, dict[str, str]] = {}
        self._configs: dict[str, LogConfig] = {}
        self._dynamic: dict[str, str] = {}
        self._default = log_config_for(broker_config, {})
        self._tasks: set[asyncio.Task[None]] = set()
        self.on_change: Callable[[str, LogConfig], None] | None = None

    async def load(self) -> None:
        """Every topic's overrides, from the store (start-up)."""
        for topic, overrides in (await self._store.all_topic_configs()).items():
            self._set(topic, overrides)

    def get(self, topic: str) -> LogConfig:
        """The topic's config as known now (the broker defaults for an unknown topic)."""
        return self._configs.get(topic, self._default)

    async def fetch(self, topic: str) -> LogConfig:
        """The topic's config, read from the store now."""
        return self._set(topic, await self._store.topic_configs(topic))

    async def refresh(self, topic: str) -> None:
        """Re-read the topic's overrides and apply them to its hosted logs."""
        config = await self.fetch(topic)
        if self.on_change is not None:
            self.on_change(topic, config)

    @property
    def default(self) -> LogConfig:
        """The config of a topic without overrides."""
        return self._default

    @property
    def dynamic(self) -> dict[str, str]:
        """The dynamic log defaults in force (broker property names)."""
        return dict(self._dynamic)

    def set_dynamic(self, dynamic: dict[str, str]) -> None:
        """New dynamic log defaults: every known topic's config is rebuilt over them."""
        self._dynamic = dict(dynamic)
        try:
            self._default = log_config_for(self._broker_config, {}, self._dynamic)
        except LogConfigError as exc:  # validated when written, each value on its own
            log.error("ignoring the dynamic log defaults %s: %s", self._dynamic, exc)
            self._dynamic = {}
            self._default = log_config_for(self._broker_config, {})
        for topic, overrides in list(self._overrides.items()):
            self._set(topic, overrides)

    def forget(self, topic: str) -> None:
        self._overrides.pop(topic, None)
        self._configs.pop(topic, None)

    def _set(self, topic: str, overrides: dict[str, str]) -> LogConfig:
        try:
            config = log_config_for(self._broker_config, overrides, self._dynamic)
        except LogConfigError as exc:  # validated when written; a hand-edited store is not
            log.error("topic %s: ignoring invalid config overrides %s: %s", topic, overrides, exc)
            config = self._default
        self._overrides[topic] = overrides
        self._configs[topic] = config
        return config

    # TopicStoreWatcher: only config changes matter here.

    def on_configs_changed(self, topic: str) -> None:
        task = asyncio.get_running_loop().create_task(self.refresh(topic))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def on_topics_changed(self) -> None:
        pass

    def on_partitions_changed(self, topic: str) -> None:
        pass

    def on_deletions_requested(self) -> None:
        pass
