"""controller.zk_store._gather: a decision's znode operations start a bounded number at a
time, in one go over many loop turns, results in order, failing fast."""

from __future__ import annotations

import asyncio

import pytest

from controller.zk_store import GATHER_LIMIT, _gather

pytestmark = pytest.mark.timeout(30)


async def test_bounded_in_order_and_spread_over_loop_turns() -> None:
    running = started = most = 0
    turns = 0

    async def op(i: int) -> int:
        nonlocal running, started, most
        started += 1
        running += 1
        most = max(most, running)
        await asyncio.sleep(0)
        running -= 1
        return i * 2

    async def count_turns() -> None:
        nonlocal turns
        while True:
            await asyncio.sleep(0)
            turns += 1

    counter = asyncio.get_running_loop().create_task(count_turns())
    results = await _gather(op(i) for i in range(1000))
    counter.cancel()
    assert results == [i * 2 for i in range(1000)]
    assert started == 1000 and most == GATHER_LIMIT
    assert turns >= 1000 // GATHER_LIMIT  # other tasks ran between the batches


async def test_first_error_raised_and_the_rest_not_started() -> None:
    started: list[int] = []

    async def op(i: int) -> int:
        started.append(i)
        await asyncio.sleep(0)
        if i == 3:
            raise ValueError("op 3 failed")
        return i

    with pytest.raises(ValueError, match="op 3 failed"):
        await _gather(op(i) for i in range(10 * GATHER_LIMIT))
    assert len(started) < 3 * GATHER_LIMIT  # fail fast: not all of them started
