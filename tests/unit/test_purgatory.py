"""broker.purgatory: each delayed operation completes exactly once, by try, timer or shutdown."""

from __future__ import annotations

import asyncio
import time

import pytest

from broker.purgatory import DelayedOperation, Purgatory

pytestmark = pytest.mark.timeout(30)
HANG_S = 20  # bound on a wait that takes milliseconds: only a hang reaches it


class Counter(DelayedOperation):
    """Completes when ``state['n'] >= target``; records every callback."""

    def __init__(self, delay_ms: int, state: dict[str, int], target: int) -> None:
        super().__init__(delay_ms)
        self.state = state
        self.target = target
        self.completions = 0
        self.expirations = 0

    def try_complete(self) -> bool:
        return self.state["n"] >= self.target

    def on_complete(self) -> None:
        self.completions += 1

    def on_expiration(self) -> None:
        self.expirations += 1


async def test_completes_at_once_when_ready() -> None:
    p: Purgatory[str] = Purgatory("t")
    op = Counter(1000, {"n": 5}, 1)
    assert p.try_complete_else_watch(op, ["a"]) is True
    assert (op.completions, op.expirations, len(p)) == (1, 0, 0)


async def test_check_and_complete_completes_watchers_of_that_key_once() -> None:
    p: Purgatory[str] = Purgatory("t")
    state = {"n": 0}
    op = Counter(5000, state, 1)
    other = Counter(5000, {"n": 0}, 1)
    assert p.try_complete_else_watch(op, ["a", "b"]) is False
    assert p.try_complete_else_watch(other, ["c"]) is False
    assert len(p) == 2 and p.watcher_count("a") == 1
    assert p.check_and_complete("a") == 0  # not ready yet
    state["n"] = 1
    assert p.check_and_complete("b") == 1
    assert p.check_and_complete("a") == 0  # already done: not completed twice
    await asyncio.wait_for(op.wait(), HANG_S)
    assert (op.completions, op.expirations) == (1, 0)
    assert p.watcher_count("a") == 0 and p.watcher_count("b") == 0 and len(p) == 1
    assert other.completions == 0


async def test_expires_after_delay_exactly_once() -> None:
    p: Purgatory[str] = Purgatory("t")
    op = Counter(50, {"n": 0}, 1)
    start = time.monotonic()
    p.try_complete_else_watch(op, ["a"])
    await asyncio.wait_for(op.wait(), HANG_S)
    assert time.monotonic() - start >= 0.04  # not before its delay (timers may fire ~1 ms early)
    assert (op.completions, op.expirations, op.expired) == (1, 1, True)
    assert len(p) == 0 and p.watcher_count("a") == 0
    op.state["n"] = 5
    assert p.check_and_complete("a") == 0
    assert op.completions == 1


async def test_completion_cancels_timer() -> None:
    p: Purgatory[str] = Purgatory("t")
    state = {"n": 0}
    op = Counter(50, state, 1)
    p.try_complete_else_watch(op, ["a"])
    state["n"] = 1
    p.check_and_complete("a")
    # A later timer expiring proves the loop went past op's delay: its timer did not fire.
    later = Counter(60, {"n": 0}, 1)
    p.try_complete_else_watch(later, ["b"])
    await asyncio.wait_for(later.wait(), HANG_S)
    assert later.expired
    assert (op.completions, op.expirations) == (1, 0)


async def test_bounded_and_shutdown_expires_all() -> None:
    p: Purgatory[int] = Purgatory("t", max_operations=3)
    ops = [Counter(10_000, {"n": 0}, 1) for _ in range(4)]
    results = [p.try_complete_else_watch(op, [i]) for i, op in enumerate(ops)]
    assert results == [False, False, False, True]  # the 4th is over the bound: expired at once
    assert ops[3].expired and len(p) == 3
    assert p.shutdown() == 3
    assert all(op.completions == 1 and op.expirations == 1 for op in ops)
    late = Counter(10_000, {"n": 0}, 1)
    assert p.try_complete_else_watch(late, [9]) is True and late.expired


async def test_zero_delay_completes_immediately() -> None:
    p: Purgatory[str] = Purgatory("t")
    op = Counter(0, {"n": 0}, 1)
    assert p.try_complete_else_watch(op, ["a"]) is True
    assert op.expired and len(p) == 0


def test_negative_delay_refused() -> None:
    with pytest.raises(ValueError):
        Counter(-1, {"n": 0}, 1)


async def test_wait_returns_once_completed_whether_parked_or_not() -> None:
    # Completed before anyone waits: returns at once.
    done = Counter(1000, {"n": 1}, 1)
    done.force_complete()
    await asyncio.wait_for(done.wait(), HANG_S)
    # Never parked (no purgatory made its waiter): a wait made here ends at completion.
    loose = Counter(1000, {"n": 0}, 1)
    waiting = asyncio.create_task(loose.wait())
    await asyncio.sleep(0)
    assert not waiting.done()
    loose.force_complete()
    await asyncio.wait_for(waiting, HANG_S)
    assert loose.completions == 1


async def test_a_cancelled_wait_leaves_the_operation_waitable() -> None:
    p: Purgatory[str] = Purgatory("t")
    state = {"n": 0}
    op = Counter(5000, state, 1)
    assert p.try_complete_else_watch(op, ["a"]) is False
    first = asyncio.create_task(op.wait())
    await asyncio.sleep(0)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    again = asyncio.create_task(op.wait())
    await asyncio.sleep(0)
    assert not again.done()
    state["n"] = 1
    assert p.check_and_complete("a") == 1
    await asyncio.wait_for(again, HANG_S)
    assert (op.completions, op.expirations) == (1, 0)


async def test_watch_parks_without_trying_and_expires_at_once_where_it_cannot_park() -> None:
    p: Purgatory[str] = Purgatory("t")
    state = {"n": 5}
    op = Counter(5000, state, 1)
    assert p.watch(op, ["a"]) is False  # ready, but not tried: the caller knew it was not
    assert (op.completions, len(p), p.watcher_count("a")) == (0, 1, 1)
    assert p.check_and_complete("a") == 1
    await asyncio.wait_for(op.wait(), HANG_S)
    assert (op.completions, op.expirations, len(p)) == (1, 0, 0)
    at_once = Counter(0, {"n": 0}, 1)
    assert p.watch(at_once, ["a"]) is True  # delay 0
    assert (at_once.completions, at_once.expirations) == (1, 1)
    p.shutdown()
    closed = Counter(5000, {"n": 0}, 1)
    assert p.watch(closed, ["a"]) is True
    assert (closed.completions, closed.expirations, len(p)) == (1, 1, 0)
