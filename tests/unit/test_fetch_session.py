"""broker.fetch_session: KIP-227 contexts, epochs, news-only answers, bounded cache."""

from __future__ import annotations

import uuid

import pytest

from broker.fetch_session import (
    INT32_MAX,
    CachedPartition,
    ContextKind,
    FetchSessionCache,
    PartitionKey,
    next_epoch,
)
from protocol.errors import ErrorCode

pytestmark = pytest.mark.timeout(10)
TID = uuid.uuid4()


def part(index: int, offset: int = 0) -> tuple[PartitionKey, CachedPartition]:
    return ("t", index), CachedPartition("t", TID, index, offset, 1000, -1)


def test_full_sessionless_and_incremental() -> None:
    cache = FetchSessionCache()
    ctx = cache.new_context(0, -1, False, [part(0)], [], now_ms=0)
    assert ctx.kind is ContextKind.SESSIONLESS and len(ctx.partitions) == 1
    ctx = cache.new_context(0, 0, False, [part(0), part(1)], [], now_ms=0)
    assert ctx.kind is ContextKind.FULL
    sid = cache.create(False, ctx.partitions, now_ms=0)
    assert sid > 0 and len(cache) == 1
    inc = cache.new_context(sid, 1, False, [part(1, 42), part(2)], [("t", 0)], now_ms=1)
    assert inc.kind is ContextKind.INCREMENTAL and inc.error is ErrorCode.NO_ERROR
    assert [(k, p.fetch_offset) for k, p in inc.partitions] == [(("t", 1), 42), (("t", 2), 0)]
    assert cache.new_context(sid, 1, False, [], [], now_ms=2).error is (
        ErrorCode.INVALID_FETCH_SESSION_EPOCH)
    assert cache.new_context(sid, 2, True, [], [], now_ms=2).error is (
        ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
    assert cache.new_context(sid + 1, 1, False, [], [], now_ms=2).error is (
        ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
    # a full fetch naming the session closes it
    cache.new_context(sid, -1, False, [], [], now_ms=3)
    assert cache.get(sid) is None


def test_must_respond_only_on_news() -> None:
    _, p = part(0)
    assert p.must_respond(0, 0, 10, 10, 0) is True  # first answer: values new
    assert p.must_respond(0, 0, 10, 10, 0) is False
    assert p.must_respond(0, 5, 10, 10, 0) is True  # records
    assert p.must_respond(0, 0, 11, 11, 0) is True  # HW moved
    assert p.must_respond(ErrorCode.OFFSET_OUT_OF_RANGE, 0, 11, 11, 0) is True
    assert p.must_respond(0, 0, 11, 11, 0) is True  # re-sent once the error clears


def test_cache_bounded_with_idle_eviction() -> None:
    cache = FetchSessionCache(max_slots=2, eviction_ms=1000)
    a = cache.create(False, [part(0)], now_ms=0)
    b = cache.create(False, [part(0)], now_ms=10)
    assert a and b and a != b
    assert cache.create(False, [part(0)], now_ms=500) == 0  # full, nobody idle long enough
    c = cache.create(False, [part(0)], now_ms=1200)  # a idle for 1200 ms: evicted
    assert c and cache.get(a) is None and cache.get(b) is not None
    assert FetchSessionCache(max_slots=0).create(False, [part(0)]) == 0


def test_epoch_wraps() -> None:
    assert next_epoch(1) == 2
    assert next_epoch(INT32_MAX) == 1
