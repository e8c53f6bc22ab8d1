"""Idempotent produce against a real broker: duplicates, sequence gaps, epochs, restarts.

Batches are built by hand with a producer id from InitProducerId, so each rule is hit
exactly: a resent batch returns its original offset with NO_ERROR and is stored once; a
gap is OUT_OF_ORDER_SEQUENCE_NUMBER; an older epoch is INVALID_PRODUCER_EPOCH; and the state
survives a SIGTERM restart (snapshot) and a kill -9 (rebuilt from the log), in every
partition of a topic of many.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from broker.producer_state import LOAD_THREADS
from client.sync import SyncClient
from protocol.errors import ErrorCode
from protocol.messages.init_producer_id import InitProducerIdRequest
from tests.integration.data_path_client import (
    LATEST,
    batch,
    create_topic,
    fetch,
    init_producer_id,
    list_offset,
    produce,
    records_of,
)

pytestmark = pytest.mark.timeout(90)


def idem(pid: int, seq: int, n: int = 2, epoch: int = 0) -> bytes:
    return batch([b"p%d-s%d-%d" % (pid, seq, i) for i in range(n)], producer_id=pid,
                 producer_epoch=epoch, base_sequence=seq)


def test_duplicate_returns_original_offset_and_is_stored_once(module_broker: Any) -> None:
    create_topic(module_broker.bootstrap, "idem-dup")
    with SyncClient(module_broker.bootstrap, timeout_ms=10_000) as c:
        _, pid, _ = init_producer_id(c)
        first = produce(c, "idem-dup", 0, idem(pid, 0))
        second = produce(c, "idem-dup", 0, idem(pid, 2))
        assert (first.error_code, first.base_offset) == (0, 0)
        assert (second.error_code, second.base_offset) == (0, 2)
        again = produce(c, "idem-dup", 0, idem(pid, 0))  # a retry of the first batch
        assert (again.error_code, again.base_offset) == (ErrorCode.NO_ERROR, 0)
        assert list_offset(c, "idem-dup", 0, LATEST)[2] == 4
        values = [r.value for r in records_of(fetch(c, "idem-dup", 0, 0).responses[0]
                                              .partitions[0].records)]
        assert values == [b"p%d-s0-0" % pid, b"p%d-s0-1" % pid, b"p%d-s2-0" % pid,
                          b"p%d-s2-1" % pid]


def test_out_of_order_and_stale_epoch(module_broker: Any) -> None:
    create_topic(module_broker.bootstrap, "idem-order")
    with SyncClient(module_broker.bootstrap, timeout_ms=10_000) as c:
        _, pid, _ = init_producer_id(c)
        assert produce(c, "idem-order", 0, idem(pid, 0, epoch=1)).error_code == 0
        gap = produce(c, "idem-order", 0, idem(pid, 5, epoch=1))
        assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        stale = produce(c, "idem-order", 0, idem(pid, 2, epoch=0))
        assert stale.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
        new_epoch_bad = produce(c, "idem-order", 0, idem(pid, 3, epoch=2))
        assert new_epoch_bad.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert produce(c, "idem-order", 0, idem(pid, 2, epoch=1)).error_code == 0
        assert list_offset(c, "idem-order", 0, LATEST)[2] == 4


def test_init_producer_id(module_broker: Any) -> None:
    with SyncClient(module_broker.bootstrap, timeout_ms=10_000) as c:
        ids = {init_producer_id(c)[1] for _ in range(5)}
        assert len(ids) == 5
        assert all(init_producer_id(c)[0] == 0 for _ in range(2))
        resp = c.send(InitProducerIdRequest(transactional_id="txn-1", transaction_timeout_ms=60000),
                      c.version_for(InitProducerIdRequest))
        assert resp.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        resp = c.send(InitProducerIdRequest(transactional_id="", transaction_timeout_ms=60000),
                      c.version_for(InitProducerIdRequest))
        assert resp.error_code == ErrorCode.INVALID_REQUEST


def test_state_and_ids_survive_sigterm_then_kill9(module_broker: Any) -> None:
    """Last in the module: restarts the shared broker (SIGTERM: snapshot; kill -9: rebuilt
    from the log after the snapshot)."""
    broker = module_broker
    topic = "idem-restart"
    create_topic(broker.bootstrap, topic)
    with SyncClient(broker.bootstrap, timeout_ms=10_000) as c:
        _, pid, _ = init_producer_id(c)
        for seq in (0, 2, 4):
            assert produce(c, topic, 0, idem(pid, seq)).error_code == 0
    broker.restart()
    with SyncClient(broker.bootstrap, timeout_ms=10_000) as c:
        dup = produce(c, topic, 0, idem(pid, 4))
        assert (dup.error_code, dup.base_offset) == (ErrorCode.NO_ERROR, 4)
        assert produce(c, topic, 0, idem(pid, 9)).error_code == (
            ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
        nxt = produce(c, topic, 0, idem(pid, 6))
        assert (nxt.error_code, nxt.base_offset) == (ErrorCode.NO_ERROR, 6)
        after_sigterm = init_producer_id(c)[1]
        assert after_sigterm > pid  # a fresh id block: never handed out twice
    broker.kill9_and_restart()
    with SyncClient(broker.bootstrap, timeout_ms=10_000) as c:
        dup = produce(c, topic, 0, idem(pid, 6))  # appended after the snapshot: replayed
        assert (dup.error_code, dup.base_offset) == (ErrorCode.NO_ERROR, 6)
        assert produce(c, topic, 0, idem(pid, 12)).error_code == (
            ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
        assert produce(c, topic, 0, idem(pid, 8)).base_offset == 8
        assert list_offset(c, topic, 0, LATEST)[2] == 10
        assert init_producer_id(c)[1] > after_sigterm


def producer_snapshots(log_dir: Path, topic: str, partitions: int) -> dict[int, tuple[str, bytes]]:
    """Each partition's one snapshot file after a clean stop: (name, bytes)."""
    found = {}
    for i in range(partitions):
        (path,) = (log_dir / f"{topic}-{i}").glob("*.snapshot")
        found[i] = (path.name, path.read_bytes())
    return found


def test_many_partitions_keep_producer_state_across_restarts(broker_factory: Any) -> None:
    """More partitions than the threads that load producer state at start-up, two
    producers in each (epochs differing by partition). After a clean restart every
    partition still knows both: a resent last batch answers its original offset, an older
    epoch is INVALID_PRODUCER_EPOCH, a gap OUT_OF_ORDER_SEQUENCE_NUMBER; stopped again, the
    snapshots it writes from the loaded state are byte for byte the ones from before the
    restart. After a kill -9 the batches after the snapshots are replayed from the log."""
    broker = broker_factory()
    topic, partitions = "idem-many", 3 * LOAD_THREADS + 2
    create_topic(broker.bootstrap, topic, partitions)
    with SyncClient(broker.bootstrap, timeout_ms=10_000) as c:
        pids = [init_producer_id(c)[1] for _ in range(3)]

        def producers(i: int) -> tuple[tuple[int, int], tuple[int, int]]:
            return (pids[i % 3], 1 + i % 4), (pids[(i + 1) % 3], 0)  # (pid, epoch) a, b

        for i in range(partitions):
            (a, ea), (b, eb) = producers(i)
            assert produce(c, topic, i, idem(a, 0, epoch=ea)).base_offset == 0
            assert produce(c, topic, i, idem(a, 2, epoch=ea)).base_offset == 2
            assert produce(c, topic, i, idem(b, 0, epoch=eb)).base_offset == 4
    assert broker.stop() == 0
    before = producer_snapshots(broker.log_dir, topic, partitions)
    assert {name for name, _ in before.values()} == {f"{6:020d}.snapshot"}
    broker.start()
    with SyncClient(broker.bootstrap, timeout_ms=10_000) as c:
        for i in range(partitions):
            (a, ea), (b, eb) = producers(i)
            dup = produce(c, topic, i, idem(a, 2, epoch=ea))
            assert (dup.error_code, dup.base_offset) == (ErrorCode.NO_ERROR, 2)
            dup = produce(c, topic, i, idem(b, 0, epoch=eb))
            assert (dup.error_code, dup.base_offset) == (ErrorCode.NO_ERROR, 4)
            assert produce(c, topic, i, idem(a, 4, epoch=ea - 1)).error_code == (
                ErrorCode.INVALID_PRODUCER_EPOCH)
            assert produce(c, topic, i, idem(b, 5, epoch=eb)).error_code == (
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
            assert list_offset(c, topic, i, LATEST)[2] == 6
    assert broker.stop() == 0
    assert producer_snapshots(broker.log_dir, topic, partitions) == before
    broker.start()
    with SyncClient(broker.bootstrap, timeout_ms=10_000) as c:
        for i in range(partitions):  # after the snapshots: only in the log
            (a, ea), _ = producers(i)
            assert produce(c, topic, i, idem(a, 4, epoch=ea)).base_offset == 6
    broker.kill9_and_restart()
    with SyncClient(broker.bootstrap, timeout_ms=10_000) as c:
        for i in range(partitions):
            (a, ea), (b, eb) = producers(i)
            dup = produce(c, topic, i, idem(a, 4, epoch=ea))
            assert (dup.error_code, dup.base_offset) == (ErrorCode.NO_ERROR, 6)
            dup = produce(c, topic, i, idem(b, 0, epoch=eb))
            assert (dup.error_code, dup.base_offset) == (ErrorCode.NO_ERROR, 4)
            assert produce(c, topic, i, idem(a, 9, epoch=ea)).error_code == (
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
            assert produce(c, topic, i, idem(a, 6, epoch=ea)).base_offset == 8
