"""controller.zk_changes.purge_expired on a real ZooKeeper: notifications created more than
CHANGE_EXPIRY_MS before "now" are deleted, newer ones stay."""

from __future__ import annotations

import time

import pytest

from controller.zk_changes import CHANGE_EXPIRY_MS, purge_expired, sequenced
from controller.zk_client import ZkClient

pytestmark = pytest.mark.timeout(60)


async def test_purge_deletes_only_expired_notifications(zk_connect: str) -> None:
    zk = await ZkClient.connect(zk_connect, session_timeout_ms=6000)
    try:
        path = "/test-changes"
        await zk.create_persistent(path, exist_ok=True)
        for _ in range(3):
            await zk.create(f"{path}/change_", b"{}", sequence=True)
        children = sequenced(await zk.children(path), "change_")
        created = [(await zk.exists(f"{path}/{c}")) for _, c in children]
        assert all(s is not None for s in created)
        await purge_expired(zk, path, children, time.time() * 1000)
        assert len(await zk.children(path)) == 3  # none is old yet
        oldest_ms = min(s.ctime_ms for s in created if s is not None)
        await purge_expired(zk, path, children, oldest_ms + CHANGE_EXPIRY_MS + 1)
        left = sequenced(await zk.children(path), "change_")
        assert left == [(seq, c) for (seq, c), s in zip(children, created, strict=True)
                        if s is not None and s.ctime_ms > oldest_ms]
        await purge_expired(zk, path, children, time.time() * 1000 + CHANGE_EXPIRY_MS + 60_000)
        assert await zk.children(path) == []
    finally:
        await zk.close()
