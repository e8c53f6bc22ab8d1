"""controller.zk_log_dir_events on a real ZooKeeper: the broker's notification in Kafka's
layout, the controller's read (watched), delete and fence."""

from __future__ import annotations

import pytest

from controller import zk_data as zd
from controller.zk_client import ControllerMovedError, ZkClient, ZkWatchFired
from controller.zk_log_dir_events import propagate_log_dir_event, take_log_dir_events
from tests.cluster.test_zk_client import Inbox

pytestmark = pytest.mark.timeout(60)


async def test_notifications_are_read_deleted_and_fenced(zk_connect: str) -> None:
    inbox = Inbox()
    zk = await ZkClient.connect(zk_connect, session_timeout_ms=6000, post=inbox.post)
    try:
        await inbox.drain(0.1)  # the initial session event
        await zk.create_persistent(zd.LOG_DIR_EVENT_NOTIFICATION)
        await zk.create(zd.CONTROLLER_EPOCH, b"1")
        watch = zk.watch("log_dir_events")
        assert await take_log_dir_events(zk, watch, 0) == []

        first = await propagate_log_dir_event(zk, 3)
        assert first == "/log_dir_event_notification/log_dir_event_0000000000"
        assert (await zk.get(first))[0] == b'{"version":1,"broker":3,"event":1}'  # Kafka's
        assert await inbox.drain() == [ZkWatchFired("log_dir_events")]
        await propagate_log_dir_event(zk, 1)
        await propagate_log_dir_event(zk, 3)
        await zk.create(f"{zd.LOG_DIR_EVENT_NOTIFICATION}/{zd.LOG_DIR_EVENT_PREFIX}",
                        b"not json", sequence=True)
        assert await take_log_dir_events(zk, watch, 0) == [1, 3]  # each broker once
        assert await zk.children(zd.LOG_DIR_EVENT_NOTIFICATION) == []  # the bad one too

        # Another controller was elected: this one deletes nothing.
        await propagate_log_dir_event(zk, 2)
        await zk.set(zd.CONTROLLER_EPOCH, b"2")
        with pytest.raises(ControllerMovedError):
            await take_log_dir_events(zk, watch, 0)
        assert await zk.children(zd.LOG_DIR_EVENT_NOTIFICATION) == [
            "log_dir_event_0000000004"]
        assert await take_log_dir_events(zk, watch, 1) == [2]
    finally:
        await zk.close()
