"""The client side of an incremental fetch session with one broker (KIP-227; Kafka's
``FetchSessionHandler``), for fetchers that poll the same partitions again and again
(replica fetchers, consumers).

A session starts with a full Fetch (session id 0, epoch 0): every partition wanted. If the
broker made a session, its answer carries the session id and the next request is
incremental (epoch 1, 2, ...): only the partitions whose fetch position changed since the
last request, plus the partitions no longer wanted (``forgotten_topics_data``); the broker
answers only partitions with news. After an error the next request is full again:
FETCH_SESSION_ID_NOT_FOUND or a broker answer with session id 0 starts afresh (id 0);
INVALID_FETCH_SESSION_EPOCH, any other top-level error or a failed exchange closes the
session and asks for a new one (the same id with epoch 0).

Sans-IO: ``build`` makes the next request, ``handle_response`` / ``handle_error`` take the
outcome; the caller sends the request (``KafkaClient.send`` to the session's broker). From
Fetch v13 topics are named by id (``topic_ids``); ``response_partitions`` maps them back.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from client.fetch import TOPIC_IDS_SINCE, FetchedPartition, records_bytes, set_replica_id
from protocol.errors import ErrorCode
from protocol.messages.fetch import FetchRequest, FetchResponse
from protocol.primitives import ZERO_UUID
from protocol.topic_partition import TopicPartition

NO_SESSION: Final = 0
INITIAL_EPOCH: Final = 0
INT32_MAX: Final = 2**31 - 1


@dataclass(frozen=True, slots=True)
class FetchPosition:
    """What the fetcher wants of one partition (a change makes it part of the next request)."""

    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1


class FetchSession:
    """One session's state; ``build`` / ``handle_response`` alternate."""

    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        self.session_id = NO_SESSION
        self.epoch = INITIAL_EPOCH
        self._session: dict[TopicPartition, FetchPosition] = {}  # what the broker holds
        self._sent: dict[TopicPartition, FetchPosition] | None = None
        self._sent_full = True

    @property
    def is_full_next(self) -> bool:
        return self.session_id == NO_SESSION or self.epoch == INITIAL_EPOCH

    def build(self, wanted: Mapping[TopicPartition, FetchPosition], version: int, *,
              topic_ids: Mapping[str, uuid.UUID] | None = None, replica_id: int = -1,
              max_wait_ms: int = 500, min_bytes: int = 1, max_bytes: int = 50 * 1024 * 1024,
              isolation_level: int = 0) -> FetchRequest:
        ids = topic_ids or {}
        full = self.is_full_next
        if full:
            send = dict(wanted)
            forget: list[TopicPartition] = []
        else:
            send = {tp: pos for tp, pos in wanted.items() if self._session.get(tp) != pos}
            forget = [tp for tp in self._session if tp not in wanted]
        if version >= TOPIC_IDS_SINCE:
            missing = sorted({tp.topic for tp in [*send, *forget] if ids.get(tp.topic, ZERO_UUID) == ZERO_UUID})
            if missing:
                raise ValueError(f"Fetch v{version} names topics by id; no id for {', '.join(missing)}")
        topics: dict[str, list[FetchRequest.FetchPartition]] = {}
        for tp, pos in sorted(send.items()):
            topics.setdefault(tp.topic, []).append(FetchRequest.FetchPartition(
                partition=tp.partition, current_leader_epoch=pos.current_leader_epoch,
                fetch_offset=pos.fetch_offset, last_fetched_epoch=pos.last_fetched_epoch,
                log_start_offset=pos.log_start_offset, partition_max_bytes=pos.max_bytes))
        forgotten: dict[str, list[int]] = {}
        for tp in sorted(forget):
            forgotten.setdefault(tp.topic, []).append(tp.partition)
        request = FetchRequest(
            max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
            isolation_level=isolation_level, session_id=self.session_id, session_epoch=self.epoch,
            topics=[FetchRequest.FetchTopic(topic=t, topic_id=ids.get(t, ZERO_UUID), partitions=p)
                    for t, p in topics.items()],
            forgotten_topics_data=[FetchRequest.ForgottenTopic(topic=t, topic_id=ids.get(t, ZERO_UUID), partitions=p)
                                   for t, p in forgotten.items()])
        set_replica_id(request, version, replica_id)
        self._sent = dict(wanted)
        self._sent_full = full
        return request

    def handle_response(self, response: FetchResponse) -> bool:
        """Take the answer to the last ``build``; False when it was a session error (the
        partitions in it are then not to be used; the next request is full)."""
        sent, self._sent = self._sent, None
        code = response.error_code
        if code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
            self._reset(NO_SESSION)
            return False
        if code != ErrorCode.NO_ERROR:
            self._reset(self.session_id)
            return False
        if response.session_id == NO_SESSION:
            self._reset(NO_SESSION)  # no session made (full), or the broker closed it
            return True
        if self._sent_full:
            self.session_id = response.session_id
            self.epoch = 1
        else:
            self.epoch = 1 if self.epoch >= INT32_MAX else self.epoch + 1
        if sent is not None:
            self._session = sent
        return True

    def handle_error(self) -> None:
        """The last request failed (no answer): close the session, ask for a new one."""
        self._sent = None
        self._reset(self.session_id)

    def _reset(self, session_id: int) -> None:
        self.session_id = session_id
        self.epoch = INITIAL_EPOCH
        self._session = {}


def response_partitions(response: FetchResponse, version: int,
                        topic_ids: Mapping[str, uuid.UUID] | None = None) -> dict[TopicPartition, FetchedPartition]:
    """The partitions of a Fetch answer by topic-partition (topic ids mapped back to names)."""
    names = {v: k for k, v in (topic_ids or {}).items()}
    out: dict[TopicPartition, FetchedPartition] = {}
    for t in response.responses:
        name = names.get(t.topic_id) if version >= TOPIC_IDS_SINCE else t.topic
        if name is None:
            continue
        for p in t.partitions:
            out[TopicPartition(name, p.partition_index)] = FetchedPartition(
                p.error_code, p.high_watermark, p.last_stable_offset, p.log_start_offset,
                records_bytes(p.records), p.preferred_read_replica)
    return out
