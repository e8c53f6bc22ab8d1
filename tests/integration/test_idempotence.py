"""Idempotent produce against a real broker: duplicates, sequence gaps, epochs, restarts.

Batches are built by hand with a producer id from InitProducerId, so each rule is hit
exactly: a resent batch returns its original offset with NO_ERROR and is stored once; a
gap is OUT_OF_ORDER_SEQUENCE_NUMBER; an older epoch is INVALID_PRODUCER_EPOCH; and the state
survives a SIGTERM restart (snapshot) and a kill -9 (rebuilt from the log).
"""

from __future__ import annotations

from typing import Any

import pytest

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
