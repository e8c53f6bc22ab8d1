"""controller.zk_changes: the change notifications' sequence order, and the watch tasks'
re-arming after a ZooKeeper error (run again later; not once the client or the tasks are
closed). Purging expired notifications is tested on a real ZooKeeper in
tests/cluster/test_zk_changes.py."""

from __future__ import annotations

import asyncio
import logging

import pytest

from controller import zk_changes
from controller.zk_changes import WatchTasks, sequenced
from controller.zk_client import ZkClosed, ZkTimeout

pytestmark = pytest.mark.timeout(30)


def test_sequenced_orders_by_sequence_and_skips_other_names() -> None:
    children = ["config_change_0000000010", "isr_change_0000000001", "config_change_0000000002",
                "config_change_x", "config_change_0000000007"]
    assert sequenced(children, "config_change_") == [
        (2, "config_change_0000000002"), (7, "config_change_0000000007"),
        (10, "config_change_0000000010")]


async def test_a_failed_watch_is_armed_again_after_a_while(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(zk_changes, "REARM_RETRY_S", 0.01)
    runs = 0
    done = asyncio.Event()

    async def work() -> None:
        nonlocal runs
        runs += 1
        if runs == 1:
            raise ZkTimeout("no answer")
        done.set()

    tasks = WatchTasks("config change", "test-watch", logging.getLogger("test.zk_changes"))
    with caplog.at_level(logging.WARNING, logger="test.zk_changes"):
        tasks.spawn(work)
        await asyncio.wait_for(done.wait(), 5)
    assert runs == 2
    assert "config change watch: no answer; re-arming in 0 s" in caplog.messages
    await tasks.close()


async def test_no_rearm_once_the_client_or_the_tasks_are_closed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(zk_changes, "REARM_RETRY_S", 0.01)
    runs = 0

    async def closed_client() -> None:
        nonlocal runs
        runs += 1
        raise ZkClosed("closed")

    tasks = WatchTasks("ACL change", "test-watch", logging.getLogger("test.zk_changes"))
    tasks.spawn(closed_client)
    await asyncio.sleep(0.1)
    assert runs == 1

    blocked = asyncio.Event()

    async def forever() -> None:
        await blocked.wait()

    tasks.spawn(forever)
    await asyncio.sleep(0)
    await asyncio.wait_for(tasks.close(), 5)  # cancels the running task
    tasks.spawn(closed_client)
    await asyncio.sleep(0.05)
    assert runs == 1
