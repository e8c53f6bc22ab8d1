"""Keys and values of ``__consumer_offsets`` records, written as Kafka writes them.

Every key and value is an int16 schema version followed by the struct of that version
(Kafka's ``GroupMetadataManager`` serde; schemas in ``protocol/schemas/internal/``)::

    offset commit key    version 1 (0 also read)  OffsetCommitKey    group string, topic string, partition int32
    group metadata key   version 2                GroupMetadataKey   group string
    offset commit value  version 3 (1 when an expire timestamp is set; 0-4 read)
                         offset int64, [leader_epoch int32 v3+], metadata string,
                         commit_timestamp int64, [expire_timestamp int64 v1]
    group metadata value version 3 (0-4 read)
                         protocol_type string, generation int32, protocol string?, leader string?,
                         [current_state_timestamp int64 v2+], members [member_id, [group_instance_id v3+],
                         client_id, client_host, [rebalance_timeout v1+], session_timeout,
                         subscription bytes, assignment bytes]

A null value is a tombstone: the offset was deleted or expired, or the group is gone
(compaction then drops the key). Kafka's ``kafka-console-consumer`` formatters for this topic
(``OffsetsMessageFormatter``, ``GroupMetadataMessageFormatter``) read these records.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, TypeAlias, TypeVar

from protocol.errors import ProtocolError
from protocol.messages.internal.group_metadata_key import GroupMetadataKey
from protocol.messages.internal.group_metadata_value import GroupMetadataValue
from protocol.messages.internal.offset_commit_key import OffsetCommitKey
from protocol.messages.internal.offset_commit_value import OffsetCommitValue

OFFSET_COMMIT_KEY_VERSION: Final = 1
GROUP_METADATA_KEY_VERSION: Final = 2
OFFSET_COMMIT_VALUE_VERSION: Final = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRE: Final = 1
GROUP_METADATA_VALUE_VERSION: Final = 3

_VERSION = struct.Struct(">h")
_INT16 = _VERSION
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_INT16_INT64 = struct.Struct(">hq")
_INT16_INT64_INT32 = struct.Struct(">hqi")
_INT64_INT64 = struct.Struct(">qq")
_MAX_STRING_BYTES = 32767
_V = TypeVar("_V")


class GroupRecordError(ProtocolError):
    """A ``__consumer_offsets`` key or value that does not decode."""


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


RecordKey: TypeAlias = OffsetKey | GroupKey


def _versioned(version: int, body: bytes) -> bytes:
    return _VERSION.pack(version) + body


def _split(data: bytes | memoryview, what: str) -> tuple[int, memoryview]:
    view = memoryview(data)
    if len(view) < 2:
        raise GroupRecordError(f"{what}: {len(view)} bytes, too short for a version")
    return _VERSION.unpack_from(view, 0)[0], view[2:]


def _string(value: str) -> bytes:
    """A Kafka (non-compact) string: int16 length + UTF-8 bytes."""
    data = value.encode("utf-8")
    if len(data) > _MAX_STRING_BYTES:
        raise GroupRecordError(f"string of {len(data)} bytes is longer than {_MAX_STRING_BYTES}")
    return _INT16.pack(len(data)) + data


def encode_offset_key(group: str, topic: str, partition: int) -> bytes:
    """OffsetCommitKey v1, packed directly (the commit hot path; same bytes as the codec's)."""
    return b"".join((
        _INT16.pack(OFFSET_COMMIT_KEY_VERSION), _string(group), _string(topic), _INT32.pack(partition)
    ))


def encode_group_key(group: str) -> bytes:
    return _versioned(
        GROUP_METADATA_KEY_VERSION, GroupMetadataKey(group).encode(GROUP_METADATA_KEY_VERSION)
    )


def decode_key(data: bytes | memoryview) -> RecordKey:
    version, body = _split(data, "key")
    try:
        if version in (0, 1):
            k = OffsetCommitKey.decode(body, version)
            return OffsetKey(k.group, k.topic, k.partition)
        if version == 2:
            return GroupKey(GroupMetadataKey.decode(body, version).group)
    except (ProtocolError, ValueError, IndexError, UnicodeDecodeError) as exc:
        raise GroupRecordError(f"bad key of version {version}: {exc}") from exc
    raise GroupRecordError(f"unknown key version {version}")


def encode_offset_value(
    offset: int, leader_epoch: int, metadata: str, commit_timestamp_ms: int,
    expire_timestamp_ms: int | None,
) -> bytes:
    """OffsetCommitValue v3 (v1 with an expire timestamp), packed directly (the commit hot
    path; the same bytes as the generated codec, checked by the unit tests)."""
    if expire_timestamp_ms is not None:
        return b"".join((
            _INT16_INT64.pack(OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRE, offset), _string(metadata),
            _INT64_INT64.pack(commit_timestamp_ms, expire_timestamp_ms),
        ))
    return b"".join((
        _INT16_INT64_INT32.pack(OFFSET_COMMIT_VALUE_VERSION, offset, leader_epoch), _string(metadata),
        _INT64.pack(commit_timestamp_ms),
    ))


def _decode_value(
    data: bytes | memoryview, short: str, name: str, highest_version: int,
    decode: Callable[[memoryview, int], _V],
) -> _V:
    """A versioned value: GroupRecordError for a short buffer (named ``short``), an unknown
    version or a body that does not decode (named ``name``)."""
    version, body = _split(data, short)
    if not 0 <= version <= highest_version:
        raise GroupRecordError(f"unknown {name} version {version}")
    try:
        return decode(body, version)
    except (ProtocolError, ValueError, IndexError, UnicodeDecodeError) as exc:
        raise GroupRecordError(f"bad {name} v{version}: {exc}") from exc


def decode_offset_value(data: bytes | memoryview) -> OffsetCommitValue:
    return _decode_value(data, "offset value", "offset commit value",
                         OffsetCommitValue.HIGHEST_VERSION, OffsetCommitValue.decode)


def encode_group_value(value: GroupMetadataValue) -> bytes:
    return _versioned(GROUP_METADATA_VALUE_VERSION, value.encode(GROUP_METADATA_VALUE_VERSION))


def decode_group_value(data: bytes | memoryview) -> GroupMetadataValue:
    return _decode_value(data, "group value", "group metadata value",
                         GroupMetadataValue.HIGHEST_VERSION, GroupMetadataValue.decode)
