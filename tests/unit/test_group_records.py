"""__consumer_offsets record encoders: the hand-packed offset key/value are byte-identical to
the generated codecs (Kafka's schemas) for any input; bad records raise one error type."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.group.records import (
    GroupRecordError,
    OffsetKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_offset_key,
    encode_offset_value,
)
from protocol.messages.internal.offset_commit_key import OffsetCommitKey
from protocol.messages.internal.offset_commit_value import OffsetCommitValue

names = st.text(max_size=60)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)


@settings(max_examples=200, deadline=None)
@given(group=names, topic=names, partition=int32)
def test_offset_key_matches_codec(group: str, topic: str, partition: int) -> None:
    fast = encode_offset_key(group, topic, partition)
    assert fast == b"\x00\x01" + OffsetCommitKey(group, topic, partition).encode(1)
    assert decode_key(fast) == OffsetKey(group, topic, partition)


@settings(max_examples=200, deadline=None)
@given(offset=int64, epoch=int32, metadata=st.text(max_size=80), ts=int64,
       expire=st.one_of(st.none(), int64))
def test_offset_value_matches_codec(offset: int, epoch: int, metadata: str, ts: int, expire: int | None) -> None:
    fast = encode_offset_value(offset, epoch, metadata, ts, expire)
    if expire is None:
        assert fast == b"\x00\x03" + OffsetCommitValue(offset, epoch, metadata, ts, -1).encode(3)
    else:
        assert fast == b"\x00\x01" + OffsetCommitValue(offset, -1, metadata, ts, expire).encode(1)
    decoded = decode_offset_value(fast)
    assert (decoded.offset, decoded.metadata, decoded.commit_timestamp) == (offset, metadata, ts)


@pytest.mark.parametrize("data", [b"", b"\x00", b"\x00\x07abc", b"\x00\x01\x00\x05ab", b"\xff\xff"])
def test_bad_keys_raise_group_record_error(data: bytes) -> None:
    with pytest.raises(GroupRecordError):
        decode_key(data)


@pytest.mark.parametrize("data", [b"", b"\x00\x09", b"\x00\x03\x00", b"\x00\x01" + b"\x00" * 5])
def test_bad_values_raise_group_record_error(data: bytes) -> None:
    with pytest.raises(GroupRecordError):
        decode_offset_value(data)
    with pytest.raises(GroupRecordError):
        decode_group_value(data)


def test_overlong_string_is_refused() -> None:
    with pytest.raises(GroupRecordError):
        encode_offset_key("g" * 40_000, "t", 0)
