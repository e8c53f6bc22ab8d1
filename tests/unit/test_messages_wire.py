"""Wire details pinned byte for byte: tagged fields, nullable structs, compact lengths."""

from __future__ import annotations

import struct

import pytest

from protocol.messages import (
    ConsumerGroupHeartbeatResponse,
    FetchResponse,
    MetadataRequest,
)
from protocol.messages.internal.offset_commit_value import OffsetCommitValue
from protocol.messages.request_header import RequestHeader

pytestmark = pytest.mark.timeout(10)


def _partition(**kw: object) -> bytes:
    resp = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(
        topic="t", partitions=[FetchResponse.PartitionData(**kw)])])  # type: ignore[arg-type]
    return resp.encode(12)


def test_tagged_fields_written_only_when_non_default_in_tag_order() -> None:
    plain = _partition()
    tagged = _partition(snapshot_id=FetchResponse.SnapshotId(end_offset=9, epoch=2),
                        diverging_epoch=FetchResponse.EpochEndOffset(epoch=3, end_offset=7))
    # Partition tagged section: default -> a single 0 byte; here 2 fields, tags 0 then 2.
    # Tag 0 DivergingEpoch: int32 epoch, int64 end offset, empty tag section = 13 bytes.
    tag0 = b"\x00\x0d" + struct.pack(">iq", 3, 7) + b"\x00"
    # Tag 2 SnapshotId: int64 end offset, int32 epoch, empty tag section.
    tag2 = b"\x02\x0d" + struct.pack(">qi", 9, 2) + b"\x00"
    assert tagged.replace(b"\x02" + tag0 + tag2, b"\x00") == plain
    back = FetchResponse.decode(tagged, 12).responses[0].partitions[0]
    assert back.snapshot_id == FetchResponse.SnapshotId(9, 2)
    assert back.current_leader == FetchResponse.LeaderIdAndEpoch()  # absent -> default


def test_nullable_struct_presence_byte() -> None:
    null = ConsumerGroupHeartbeatResponse(member_id="m", assignment=None).encode(0)
    present = ConsumerGroupHeartbeatResponse(
        member_id="m", assignment=ConsumerGroupHeartbeatResponse.Assignment()).encode(0)
    # int8 -1 for null; 1 then the struct (empty compact array + empty tags) when present.
    assert null.endswith(b"\xff\x00")
    assert present.endswith(b"\x01\x01\x00\x00")
    assert ConsumerGroupHeartbeatResponse.decode(null, 0).assignment is None


def test_compact_and_classic_nullable_arrays() -> None:
    assert MetadataRequest(topics=None).encode(1) == b"\xff\xff\xff\xff"
    # v9: null compact array (0), AllowAutoTopicCreation (default true), two include-flags
    # (false), empty tagged fields.
    assert MetadataRequest(topics=None).encode(9) == b"\x00\x01\x00\x00\x00"
    assert MetadataRequest(topics=[]).encode(9)[0] == 1  # compact: count + 1


def test_request_header_client_id_is_never_compact() -> None:
    # RequestHeader.json: ClientId has flexibleVersions "none": classic string in v2 too.
    wire = RequestHeader(request_api_key=3, request_api_version=12, correlation_id=1,
                         client_id="ab").encode(2)
    assert wire == struct.pack(">hhih", 3, 12, 1, 2) + b"ab" + b"\x00"


def test_internal_record_versions() -> None:
    value = OffsetCommitValue(offset=5, leader_epoch=2, metadata="m", commit_timestamp=9)
    v3 = value.encode(3)
    assert v3 == struct.pack(">qih", 5, 2, 1) + b"m" + struct.pack(">q", 9)
    assert OffsetCommitValue.decode(v3, 3) == value
    # expireTimestamp exists only in v1 and is ignorable: dropped elsewhere, kept in v1.
    v1 = OffsetCommitValue(offset=5, metadata="", commit_timestamp=9, expire_timestamp=11)
    assert OffsetCommitValue.decode(v1.encode(1), 1).expire_timestamp == 11
