"""A long poll parked in the fetch purgatory and completed by an append reads the log once:
the read that found min_bytes is the answer (DelayedFetch keeps it), not read a second time.
The answer is what a fresh read returns: the new batch, with the offsets of that moment."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from client.sync import SyncClient
from pytest_minikafka import BrokerHandle
from storage.segment import LogSegment
from tests.integration.data_path_client import (
    batch,
    broker_read_what_was_sent,
    create_topic,
    fetch,
    list_offset,
    produce,
    raw,
)

pytestmark = [pytest.mark.timeout(60)]


def _records(n: int) -> bytes:
    return batch([b"v%d" % i for i in range(n)], timestamp_ms=1_700_000_000_000)


@pytest.mark.minikafka(subprocess=False)
def test_parked_fetch_woken_by_an_append_reads_the_log_once(
        kafka_broker: BrokerHandle, monkeypatch: pytest.MonkeyPatch) -> None:
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, "parked", partitions=1)
    create_topic(bootstrap, "idle", partitions=1)
    reads: list[int] = []
    # Each read of the log that finds data reads one segment. LogSegment stays pure Python in
    # the compiled build (scripts/build-request-path), so a compiled Log calls this patch too
    # (a native class such as the compiled Log cannot be patched).
    real_read = LogSegment.read

    def counting_read(self: LogSegment, *args: Any, **kwargs: Any) -> Any:
        reads.append(1)
        return real_read(self, *args, **kwargs)

    monkeypatch.setattr(LogSegment, "read", counting_read)
    with SyncClient(bootstrap, timeout_ms=20_000) as consumer, \
            SyncClient(bootstrap, timeout_ms=10_000) as producer:
        assert produce(producer, "parked", 0, _records(2), acks=1).error_code == 0
        # A consumer's long poll at the log end, on a thread of its own.
        answer: list[Any] = []
        t = threading.Thread(target=lambda: answer.append(
            fetch(consumer, "parked", 0, 2, max_wait_ms=15_000, version=11)))
        t.start()
        broker_read_what_was_sent(bootstrap, "idle")  # the fetch is parked
        reads.clear()
        assert produce(producer, "parked", 0, _records(3), acks=1).error_code == 0
        t.join(15)
        assert answer, "the parked fetch was not answered"
        assert len(reads) == 1
        part = answer[0].responses[0].partitions[0]
        assert part.error_code == 0 and part.high_watermark == 5
        assert raw(part.records)[17:] == _records(3)[17:]  # the new batch, from its CRC on
        # What a fresh read of the same position returns.
        again = fetch(producer, "parked", 0, 2, version=11).responses[0].partitions[0]
        assert raw(again.records) == raw(part.records)
        assert list_offset(producer, "parked", 0, -1)[2] == 5
