"""Fetch v4-17 of one partition of one topic, sessionless, from a consumer: the body read and
the response frame written without the generated message classes, for the broker's fetch
fast path.

This is the request librdkafka (confluent-kafka) sends a broker for one assigned partition:
no fetch session (session id 0, epoch -1), replica id -1, no rack, no tagged fields.
Everything else (several topics or partitions, a session, a follower, forgotten topics, a
rack id, tagged fields, a multi-byte varint where one byte is the norm, any malformed byte)
is left to the generated codec (``protocol.messages.fetch``): ``decode_single`` then
returns None and never raises, so the generated decoder reports every error as before.
What both read, and the frames both write, are equal byte for byte
(tests/unit/test_fetch_fast.py).

Request body, as read here (after the request header)::

    v4-14  int32 replica_id (-1)                    (v15+: none; the tagged ReplicaState)
           int32 max_wait_ms, int32 min_bytes, int32 max_bytes, int8 isolation_level
    v7+    int32 session_id (0), int32 session_epoch (-1)
    v4-11  int32 1 topic, int16 name length, name, int32 1 partition
    v12    2, name length + 1 (one byte), name, 2
    v13+   2, 16-byte topic id, 2
           int32 partition, [int32 current_leader_epoch: v9+], int64 fetch_offset,
           [int32 last_fetched_epoch: v12+], [int64 log_start_offset: v5+],
           int32 partition_max_bytes, [0: partition tags, v12+]
    v12+   0 (topic tags)
    v7-11  int32 0 forgotten topics             (v12+: 1)
    v11    int16 0 (empty rack id)              (v12+: 1)
    v12+   0 (request tags)

Bytes after the body are ignored, as the generated decoder (and Kafka) ignores them.

Response frame, one partition, no throttle, no session, no error at the top::

    int32 size, int32 correlation_id, [0: header tags, v12+]
    int32 throttle_time_ms (0), [int16 error_code (0), int32 session_id (0): v7+]
    v4-11  int32 1, int16 name length, name, int32 1
    v12    2, name length + 1, name, 2
    v13+   2, 16-byte topic id, 2
           int32 partition, int16 error_code, int64 high_watermark,
           int64 last_stable_offset, [int64 log_start_offset: v5+],
           aborted transactions: v4-11 int32 -1 (null) or 0 (empty), v12+ 0 or 1,
           [int32 preferred_read_replica: v11+],
           records: v4-11 int32 length, v12+ uvarint length + 1, then the record bytes
    v12+   0 (partition tags), 0 (topic tags), 0 (response tags)

The record bytes are the caller's (a FileSlice: sent with sendfile or copied by the
network layer); ``encode_single_response_head`` writes what precedes them, and
``FLEXIBLE_TAIL`` what follows them from v12 on.
"""

from __future__ import annotations

import struct
import uuid
from typing import Final, NamedTuple

from protocol.errors import ProtocolError
from protocol.primitives import read_uuid, uvarint

MIN_VERSION: Final = 4
MAX_VERSION: Final = 17
FLEXIBLE_FROM: Final = 12
TOPIC_IDS_FROM: Final = 13
NO_REPLICA_ID_FROM: Final = 15
FLEXIBLE_TAIL: Final = b"\x00\x00\x00"  # partition, topic and response tags (v12+)

_HEAD_V4 = struct.Struct(">iiiib")  # replica_id, max_wait_ms, min_bytes, max_bytes, isolation
_HEAD_V7 = struct.Struct(">iiiibii")  # ... session_id, session_epoch
_HEAD_V15 = struct.Struct(">iiibii")  # no replica_id
_IH = struct.Struct(">ih")  # topic count, name length
_I = struct.Struct(">i")
_PART_V4 = struct.Struct(">iqi")  # partition, fetch_offset, partition_max_bytes
_PART_V5 = struct.Struct(">iqqi")  # ... log_start_offset before partition_max_bytes
_PART_V9 = struct.Struct(">iiqqi")  # current_leader_epoch after partition
_PART_V12 = struct.Struct(">iiqiqi")  # last_fetched_epoch after fetch_offset


class SingleFetch(NamedTuple):
    """What ``decode_single`` reads, in the generated request's terms."""

    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: int
    topic: str  # "" from v13 on (the request names the topic by its id)
    topic_id: uuid.UUID  # the zero UUID before v13
    partition: int
    current_leader_epoch: int  # -1 before v9
    fetch_offset: int
    partition_max_bytes: int


_new_single = tuple.__new__  # a NamedTuple's own __new__ is Python code; this is C
_ZERO_UUID: Final = uuid.UUID(int=0)


def decode_single(frame: bytes, p: int, version: int) -> SingleFetch | None:
    """The Fetch body at ``p`` of ``frame``, if it is a sessionless consumer fetch of one
    partition of one topic with no rack id and no tagged fields; None for anything else
    (the generated decoder takes it: never raises)."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        return None
    n = len(frame)
    try:
        if version >= NO_REPLICA_ID_FROM:
            max_wait, min_bytes, max_bytes, isolation, session, epoch = _HEAD_V15.unpack_from(
                frame, p)
            p += 21
        elif version >= 7:
            replica, max_wait, min_bytes, max_bytes, isolation, session, epoch = (
                _HEAD_V7.unpack_from(frame, p))
            if replica != -1:
                return None
            p += 25
        else:
            replica, max_wait, min_bytes, max_bytes, isolation = _HEAD_V4.unpack_from(frame, p)
            if replica != -1:
                return None
            session, epoch = 0, -1
            p += 17
        if session != 0 or epoch != -1:
            return None
        topic = ""
        topic_id = _ZERO_UUID
        if version >= FLEXIBLE_FROM:
            if frame[p] != 2:
                return None
            if version >= TOPIC_IDS_FROM:
                if p + 18 > n:
                    return None
                topic_id, p = read_uuid(memoryview(frame), p + 1)
            else:
                name_len = frame[p + 1] - 1
                if name_len < 0 or name_len >= 0x7F:
                    return None
                p += 2
                end = p + name_len
                if end > n:
                    return None
                topic = frame[p:end].decode()
                p = end
            if frame[p] != 2:
                return None
            partition, leader_epoch, offset, _last_fetched, _start, part_max = (
                _PART_V12.unpack_from(frame, p + 1))
            p += 33
            # partition tags, topic tags, no forgotten topics, empty rack id, request tags
            if frame[p:p + 5] != b"\x00\x00\x01\x01\x00":
                return None
        else:
            count, name_len = _IH.unpack_from(frame, p)
            if count != 1 or name_len < 0:
                return None
            p += 6
            end = p + name_len
            if end > n:
                return None
            topic = frame[p:end].decode()
            (count,) = _I.unpack_from(frame, end)
            if count != 1:
                return None
            p = end + 4
            leader_epoch = -1
            if version >= 9:
                partition, leader_epoch, offset, _start, part_max = _PART_V9.unpack_from(frame, p)
                p += 28
            elif version >= 5:
                partition, offset, _start, part_max = _PART_V5.unpack_from(frame, p)
                p += 24
            else:
                partition, offset, part_max = _PART_V4.unpack_from(frame, p)
                p += 16
            if version >= 7:
                (count,) = _I.unpack_from(frame, p)  # forgotten topics
                if count != 0:
                    return None
                if version >= 11 and frame[p + 4:p + 6] != b"\x00\x00":  # rack id
                    return None
    except (UnicodeDecodeError, IndexError, struct.error, ProtocolError):
        return None
    return _new_single(SingleFetch, (max_wait, min_bytes, max_bytes, isolation, topic,
                                     topic_id, partition, leader_epoch, offset, part_max))


# Response layouts, from the throttle time to the partition index (the topic varies).
_TOP_V4 = struct.Struct(">iiih")  # correlation_id, throttle_time_ms, 1 topic, name length
_TOP_V7 = struct.Struct(">iihiih")  # correlation_id, throttle, error, session_id, 1, name length
_TOP_V12 = struct.Struct(">iBihiBB")  # ..., header tags, throttle, error, session, 2, name + 1
_TOP_V13 = struct.Struct(">iBihiB")  # ..., header tags, throttle, error, session, 2
_PART_CLASSIC = {  # after the name: int32 1, partition fields up to and with aborted txns
    4: struct.Struct(">iihqqi"),
    5: struct.Struct(">iihqqqi"),
    11: struct.Struct(">iihqqqii"),  # + preferred_read_replica
}
_PART_FLEX = struct.Struct(">BihqqqBi")  # 2, partition ... log_start, aborted, preferred


def encode_single_response_head(correlation_id: int, version: int, topic: str,
                                topic_id: uuid.UUID, partition: int, error_code: int,
                                high_watermark: int, last_stable_offset: int,
                                log_start_offset: int, aborted_empty: bool,
                                preferred_read_replica: int, records_length: int
                                ) -> bytes | None:
    """The response frame up to the record bytes (the size counts them and, v12+, the
    ``FLEXIBLE_TAIL`` after them): one partition answered, throttle 0, session id 0, no
    top-level error. None where a general encoding is needed (a version outside 4-17, a
    topic name of 127 bytes or more at v12)."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        return None
    if version >= FLEXIBLE_FROM:
        if version >= TOPIC_IDS_FROM:
            top = _TOP_V13.pack(correlation_id, 0, 0, 0, 0, 2) + topic_id.bytes
        else:
            name = topic.encode()
            if len(name) >= 0x7F:
                return None
            top = _TOP_V12.pack(correlation_id, 0, 0, 0, 0, 2, len(name) + 1) + name
        body = top + _PART_FLEX.pack(2, partition, error_code, high_watermark,
                                     last_stable_offset, log_start_offset,
                                     1 if aborted_empty else 0, preferred_read_replica
                                     ) + uvarint(records_length + 1)
        return _I.pack(len(body) + records_length + 3) + body
    name = topic.encode()
    if version >= 7:
        top = _TOP_V7.pack(correlation_id, 0, 0, 0, 1, len(name)) + name
    else:
        top = _TOP_V4.pack(correlation_id, 0, 1, len(name)) + name
    aborted = 0 if aborted_empty else -1
    if version >= 11:
        part = _PART_CLASSIC[11].pack(1, partition, error_code, high_watermark,
                                      last_stable_offset, log_start_offset, aborted,
                                      preferred_read_replica)
    elif version >= 5:
        part = _PART_CLASSIC[5].pack(1, partition, error_code, high_watermark,
                                     last_stable_offset, log_start_offset, aborted)
    else:
        part = _PART_CLASSIC[4].pack(1, partition, error_code, high_watermark,
                                     last_stable_offset, aborted)
    body = top + part + _I.pack(records_length)
    return _I.pack(len(body) + records_length) + body
