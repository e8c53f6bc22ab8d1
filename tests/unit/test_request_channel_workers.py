"""``num.io.threads`` changed while running (a dynamic broker config): the request channel's
pool of IO worker tasks grows and shrinks, and the workers left keep taking requests."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from broker.network.request_channel import RequestChannel


async def test_io_workers_grow_and_shrink_and_idle_ones_stop() -> None:
    channel = RequestChannel(cast(Any, None), queued_max_requests=10, num_workers=2)
    channel.resize_workers(3)  # before start: start uses the new count
    assert channel.worker_count == 0
    channel.start()
    assert channel.worker_count == 3
    channel.resize_workers(8)
    assert channel.worker_count == 8
    channel.resize_workers(1)
    await asyncio.sleep(0)  # the cancelled workers end at their queue.get
    assert channel.worker_count == 1
    running = [t for t in asyncio.all_tasks() if t.get_name().startswith("io-worker-")]
    assert [t.get_name() for t in running] == ["io-worker-0"]
    await channel.stop()
    assert channel.worker_count == 0
