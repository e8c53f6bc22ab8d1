"""Failed log dirs in ZooKeeper (Kafka's ``LogDirEventNotificationZNode``).

A broker whose log dir fails tells the controller by writing a persistent sequential znode
``/log_dir_event_notification/log_dir_event_<10 digits>`` holding
``{"version":1,"broker":<id>,"event":1}`` (Kafka's ``propagateLogDirEvent``). The
controller watches the children of ``/log_dir_event_notification``; each time they change
it reads them, deletes them (fenced by its ``/controller_epoch`` version, as Kafka's
``deleteLogDirEventNotifications``) and asks those brokers which of their replicas are
offline (``ZkControllerCore``'s ``BrokerLogDirFailure``). A new controller deletes what it
finds without acting on it: its failover sends every broker LeaderAndIsr anyway, and the
answers say the same.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Final

from controller import zk_data as zd
from controller.zk_client import DeleteOp, ZkClient

log = logging.getLogger(__name__)

MAX_EVENTS_PER_READ: Final = 10_000  # children read per watch firing (the rest next time)


async def propagate_log_dir_event(zk: ZkClient, broker_id: int) -> str:
    """Write this broker's log dir failure notification; returns the created path."""
    return await zk.create(f"{zd.LOG_DIR_EVENT_NOTIFICATION}/{zd.LOG_DIR_EVENT_PREFIX}",
                           zd.encode_log_dir_event(broker_id), sequence=True)


async def take_log_dir_events(zk: ZkClient, watch: Callable[[Any], None],
                              controller_epoch_zk_version: int) -> list[int]:
    """Read the pending notifications (setting ``watch`` on the parent), delete them and
    return the brokers they name, sorted, each once. A notification that does not decode
    is logged and deleted. Raises ``ControllerMovedError`` when another controller took
    over (nothing more is deleted then)."""
    children = [c for c in await zk.children(zd.LOG_DIR_EVENT_NOTIFICATION, watch=watch)
                if c.startswith(zd.LOG_DIR_EVENT_PREFIX)][:MAX_EVENTS_PER_READ]
    brokers: set[int] = set()
    for child in children:
        path = f"{zd.LOG_DIR_EVENT_NOTIFICATION}/{child}"
        found = await zk.get_or_none(path)
        if found is not None:
            try:
                brokers.add(zd.decode_log_dir_event(found[0]))
            except zd.ZkDataError as exc:
                log.warning("Ignoring log dir event notification %s: %s", child, exc)
        # A znode already gone shows as an error in the results: nothing to do then.
        await zk.multi([DeleteOp(path)], controller_epoch_zk_version=controller_epoch_zk_version)
    return sorted(brokers)
