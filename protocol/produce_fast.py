"""Produce v3-11 with one topic and one partition: the body read and the response frame
written without the generated message classes, for the broker's produce fast path.

This is the shape of nearly every request a non-transactional client sends with
``linger.ms=0`` (librdkafka, the Java producer): one batch for one partition. Everything
else (several topics or partitions, a transactional id, null records, tagged fields, a
multi-byte varint where one byte is the norm, any malformed byte) is left to the generated
codec (``protocol.messages.produce``): ``decode_single`` then returns None and never
raises, so the generated decoder reports every error as before. What both read, and the
frames both write, are equal byte for byte (tests/unit/test_produce_fast.py).

Request body, as read here (after the request header)::

    v3-8   int16 transactional_id length (-1: null, else not served here)
           int16 acks, int32 timeout_ms
           int32 topic count (1), int16 name length, name (UTF-8)
           int32 partition count (1), int32 index, int32 records length (>= 0), records
    v9-11  uvarint transactional_id length + 1 (0: null, else not served here)
           int16 acks, int32 timeout_ms
           uvarint topic count + 1 (2), uvarint name length + 1 (one byte), name
           uvarint partition count + 1 (2), int32 index,
           uvarint records length + 1 (one to three bytes), records,
           0 (partition tags), 0 (topic tags), 0 (request tags)

Bytes after the body are ignored, as the generated decoder (and Kafka) ignores them.

Response frame, for a partition answered with no record errors and no error message (every
successful append), no current-leader hint and no node endpoints::

    int32 size, int32 correlation_id, [0: header tags, v9+]
    v3-8   int32 1, int16 name length, name, int32 1,
           int32 index, int16 error_code, int64 base_offset, int64 log_append_time_ms,
           [int64 log_start_offset: v5+], [int32 0 record errors, int16 -1 message: v8]
           int32 throttle_time_ms
    v9-11  2, name length + 1, name, 2,
           int32 index, int16 error_code, int64 base_offset, int64 log_append_time_ms,
           int64 log_start_offset, 1 (no record errors), 0 (null message), 0 (tags),
           0 (topic tags), int32 throttle_time_ms, 0 (tags)
"""

from __future__ import annotations

import struct
from typing import Final, TypeAlias

MIN_VERSION: Final = 3
MAX_VERSION: Final = 11
FLEXIBLE_FROM: Final = 9

_HI = struct.Struct(">hi")
# v9+: transactional id length + 1 (0: null), acks, timeout, topic count + 1, name length + 1
_FLEX_HEAD = struct.Struct(">BhiBB")
# v9+, after the name: partition count + 1, index, the records length's first varint byte
_FLEX_PARTITION = struct.Struct(">BiB")
_I = struct.Struct(">i")
_CLASSIC_TOPIC = struct.Struct(">ih")  # topic count, name length
_CLASSIC_PARTITION = struct.Struct(">iii")  # partition count, index, records length


def decode_single(frame: bytes, p: int, version: int
                  ) -> tuple[int, int, str, int, memoryview] | None:
    """(acks, timeout_ms, topic, partition, records) of the Produce body at ``p`` of
    ``frame``, if it is one partition of one topic with records and no transactional id;
    None for anything else (the generated decoder takes it: never raises)."""
    n = len(frame)
    try:
        if version >= FLEXIBLE_FROM:
            if version > MAX_VERSION:
                return None
            # One struct call for what precedes the name, one for what follows it (a frame
            # too short for either raises struct.error: None)
            txn, acks, timeout_ms, topics, name_len = _FLEX_HEAD.unpack_from(frame, p)
            name_len -= 1
            if txn != 0 or topics != 2 or name_len < 0 or name_len >= 0x7F:
                return None
            p += 9
            end = p + name_len
            partitions, index, raw = _FLEX_PARTITION.unpack_from(frame, end)
            if partitions != 2:
                return None
            topic = frame[p:end].decode()
            p = end + 6
            if raw >= 0x80:
                second = frame[p]
                if second < 0x80:
                    raw = (raw & 0x7F) | (second << 7)
                    p += 1
                else:
                    third = frame[p + 1]
                    if third >= 0x80:
                        return None
                    raw = (raw & 0x7F) | ((second & 0x7F) << 7) | (third << 14)
                    p += 2
            if raw == 0:
                return None
            end = p + raw - 1
            if end + 3 > n or frame[end] != 0 or frame[end + 1] != 0 or frame[end + 2] != 0:
                return None
        else:
            if version < MIN_VERSION or p + 14 > n:
                return None
            if frame[p] != 0xFF or frame[p + 1] != 0xFF:
                return None
            acks, timeout_ms = _HI.unpack_from(frame, p + 2)
            count, name_len = _CLASSIC_TOPIC.unpack_from(frame, p + 8)
            if count != 1 or name_len < 0:
                return None
            p += 14
            end = p + name_len
            if end + 12 > n:
                return None
            topic = frame[p:end].decode()
            count, index, size = _CLASSIC_PARTITION.unpack_from(frame, end)
            if count != 1 or size < 0:
                return None
            p = end + 12
            end = p + size
            if end > n:
                return None
        records = memoryview(frame)[p:end]
    except (UnicodeDecodeError, IndexError, struct.error):
        return None
    return acks, timeout_ms, topic, index, records


def encode_single_response(correlation_id: int, version: int, topic: str, index: int,
                           error_code: int, base_offset: int, log_append_time_ms: int,
                           log_start_offset: int, throttle_time_ms: int) -> bytes | None:
    """The whole response frame (size, header, body) for one partition answered with no
    record errors and no error message; None where a general encoding is needed (a version
    outside 3-11, a topic name of 127 bytes or more). One ``struct`` call, with what does
    not change from one answer to the next for the partition and version (the frame's
    size, the topic's name and count, the partition's count and index) made once
    (``_FRAMES``)."""
    known = _FRAMES.get((topic, index, version))
    if known is None:
        known = _frame(topic, index, version)
        if known is None:
            return None
    size, layout, fixed = known
    if version >= FLEXIBLE_FROM:
        return layout.pack(size, correlation_id, fixed, error_code, base_offset,
                           log_append_time_ms, log_start_offset, 1, throttle_time_ms)
    if version >= 8:
        return layout.pack(size, correlation_id, fixed, error_code, base_offset,
                           log_append_time_ms, log_start_offset, 0, -1, throttle_time_ms)
    if version >= 5:
        return layout.pack(size, correlation_id, fixed, error_code, base_offset,
                           log_append_time_ms, log_start_offset, throttle_time_ms)
    return layout.pack(size, correlation_id, fixed, error_code, base_offset,
                       log_append_time_ms, throttle_time_ms)


def single_response_template(version: int, topic: str, index: int, error_code: int,
                             log_append_time_ms: int, log_start_offset: int,
                             throttle_time_ms: int) -> ResponseTemplate | None:
    """The frames ``encode_single_response`` writes for answers of one partition that differ
    only in their correlation id and base offset (a group append's requests): (layout,
    head, middle, tail), each answer ``layout.pack(head, correlation_id, middle,
    base_offset, tail)``, the same bytes; None where it answers None. A call of 5
    arguments per answer where ``encode_single_response`` is a call of 9 and its lookup."""
    whole = encode_single_response(0, version, topic, index, error_code, 0, log_append_time_ms,
                                   log_start_offset, throttle_time_ms)
    if whole is None:
        return None
    # The size and correlation id, the fixed bytes and the error code, the base offset,
    # then the rest (log append time, ...).
    m = len(_FRAMES[(topic, index, version)][2]) + 2
    head, middle, tail = whole[:4], whole[8:8 + m], whole[16 + m:]
    key = (m, len(tail))
    layout = _TEMPLATE_LAYOUTS.get(key)
    if layout is None:  # (at most ~130 name lengths x the 4 tails of the version ranges)
        layout = _TEMPLATE_LAYOUTS[key] = struct.Struct(f">4si{m}sq{len(tail)}s")
    return layout, head, middle, tail


# single_response_template's: (layout, head, middle, tail)
ResponseTemplate: TypeAlias = tuple[struct.Struct, bytes, bytes, bytes]
_TEMPLATE_LAYOUTS: dict[tuple[int, int], struct.Struct] = {}

# Whole response frames by version range: size, correlation id, then the bytes from the
# header's end up to the partition's index included (``{}``: their length), then the
# partition's answer and what follows it:
# v9+: [header tags 0, topics 2, name length + 1, name, partitions 2, index], error, base
# offset, log append time, log start offset, 1 (no record errors), 0 (null message), 0
# (tags), 0 (topic tags), throttle, 0 (tags)
_V9_FORMAT = ">ii{}shqqqB3xix"
# v8: [topics 1, name length, name, partitions 1, index], ..., log start offset, 0 record
# errors, -1 (null message), throttle
_V8_FORMAT = ">ii{}shqqqihi"
_V5_FORMAT = ">ii{}shqqqi"  # v5-7: ..., log start offset, throttle
_V3_FORMAT = ">ii{}shqqi"  # v3-4: ..., log append time, throttle
_V9_LAYOUTS: dict[int, struct.Struct] = {}  # by the length of the fixed bytes
_V8_LAYOUTS: dict[int, struct.Struct] = {}
_V5_LAYOUTS: dict[int, struct.Struct] = {}
_V3_LAYOUTS: dict[int, struct.Struct] = {}
# (topic, partition index, version) -> (the frame's size field, its layout, its fixed
# bytes); emptied when it holds FRAMES_MAX (a broker answering many partitions).
_FRAMES: dict[tuple[str, int, int], tuple[int, struct.Struct, bytes]] = {}
FRAMES_MAX: Final = 4096


def _frame(topic: str, index: int, version: int) -> tuple[int, struct.Struct, bytes] | None:
    """``_FRAMES``' entry for the key (added), or None: not encoded here."""
    name = topic.encode()
    n = len(name)
    if n >= 0x7F or not MIN_VERSION <= version <= MAX_VERSION:
        return None
    if version >= FLEXIBLE_FROM:
        fixed = struct.pack(f">BBB{n}sBi", 0, 2, n + 1, name, 2, index)
        layouts, fmt = _V9_LAYOUTS, _V9_FORMAT
    else:
        fixed = struct.pack(f">ih{n}sii", 1, n, name, 1, index)
        layouts, fmt = ((_V8_LAYOUTS, _V8_FORMAT) if version >= 8 else
                        (_V5_LAYOUTS, _V5_FORMAT) if version >= 5 else (_V3_LAYOUTS, _V3_FORMAT))
    m = len(fixed)
    layout = layouts.get(m)
    if layout is None:
        layout = layouts[m] = struct.Struct(fmt.format(m))
    if len(_FRAMES) >= FRAMES_MAX:
        _FRAMES.clear()
    known = _FRAMES[(topic, index, version)] = (layout.size - 4, layout, fixed)
    return known
