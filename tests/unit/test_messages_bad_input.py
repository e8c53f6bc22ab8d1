"""Bad input to the decoders: only ProtocolError ever comes out, after work bounded by the
input's size, without big allocations.

Random bytes and mutated valid encodings go to every request decoder (every version) and
to ``decode_request_header``; hand-built frames check the named failure modes: a huge length
prefix, negative counts, null where a version forbids it, over-long varints.

"Quickly" is measured in work, not wall-clock time (which a loaded machine stretches):
the function calls a decode makes (Python and C, counted with ``sys.setprofile``) must
stay within ``CALLS_PER_BYTE`` per input byte. The worst seen over the fuzzed inputs is
about 18 per byte; a decoder that trusted a length prefix of 2**31 would make millions.
"""

from __future__ import annotations

import contextlib
import gc
import struct
import sys
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.errors import ProtocolError
from protocol.frames import decode_request_header
from protocol.messages import (
    ApiVersionsRequest,
    MetadataRequest,
    OffsetCommitRequest,
    ProduceRequest,
)
from protocol.primitives import UnsupportedVersionError
from tests.unit.message_strategies import all_specs, message_class, message_strategy

REQUESTS = [s for s in all_specs() if s.kind == "request"]
FUZZ = settings(max_examples=20, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


CALLS_PER_BYTE = 64


def _decode_or_protocol_error(cls: Any, data: bytes, version: int) -> None:
    with contextlib.suppress(ProtocolError):
        cls.decode(data, version)


def calls_made(fn: Callable[[], object]) -> int:
    """Python and C function calls made while ``fn`` runs (a machine-independent measure of
    work: the same input always makes the same calls)."""
    calls = 0

    def count(frame: Any, event: str, arg: Any) -> None:
        nonlocal calls
        if event in ("call", "c_call"):
            calls += 1

    # No collection while counting: a collection runs the finalizers and weakref callbacks
    # of other tests' garbage (Python calls), the likely cause of 81 calls counted once for
    # decoding b"" in the xdist suite (14 alone; hypothesis reported it as flaky).
    enabled = gc.isenabled()
    gc.disable()
    previous = sys.getprofile()
    sys.setprofile(count)
    try:
        fn()
    finally:
        sys.setprofile(previous)
        if enabled:
            gc.enable()
    return calls


def assert_bounded_work(cls: Any, data: bytes, version: int) -> None:
    calls = calls_made(lambda: _decode_or_protocol_error(cls, data, version))
    assert calls <= CALLS_PER_BYTE * (len(data) + 1), (cls.__name__, version, len(data), calls)


@st.composite
def _mutated(draw: Any, name: str, version: int) -> bytes:
    wire = bytearray(draw(message_strategy(name, version)).encode(version))
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["truncate", "set", "insert"]))
        pos = draw(st.integers(0, len(wire)))
        if kind == "truncate":
            del wire[pos:]
        elif kind == "set" and pos < len(wire):
            wire[pos] = draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFE, 0xFF]))
        else:
            wire[pos:pos] = draw(st.sampled_from([b"\xff", b"\xff\xff\xff\xff", b"\x80",
                                                  b"\x7f\xff\xff\xff"]))
    return bytes(wire)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("spec", REQUESTS, ids=[s.name for s in REQUESTS])
def test_request_decoders_raise_only_protocol_error(spec: Any) -> None:
    cls = message_class(spec)
    versions = list(spec.versions)

    @FUZZ
    @given(data=st.data())
    def check(data: Any) -> None:
        version = data.draw(st.sampled_from(versions))
        if data.draw(st.booleans()):
            raw = data.draw(st.binary(max_size=48))
        else:
            raw = data.draw(_mutated(spec.name, version))
        assert_bounded_work(cls, raw, version)

    check()


@pytest.mark.timeout(30)
@settings(max_examples=300, deadline=None, database=None)
@given(raw=st.binary(max_size=40))
def test_request_header_random_bytes(raw: bytes) -> None:
    try:
        header, offset = decode_request_header(raw)
    except ProtocolError:
        return
    assert 8 <= offset <= len(raw)
    assert header.client_id is not None


def _frame_peak_bytes(fn: Any) -> int:
    tracemalloc.start()
    try:
        fn()
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return peak


@pytest.mark.timeout(10)
def test_huge_length_prefixes_fail_at_once_without_allocating() -> None:
    # ProduceRequest v3: transactional id (nullable string), acks, timeout, topics array.
    huge_array = struct.pack(">hhii", -1, 1, 1000, 0x7FFFFFFF)
    huge_string = struct.pack(">h", 0x7FFF) + b"abc"
    # v9: compact array count near 2**32, then a records length of 2**31 - 1.
    huge_compact = b"\x00" + struct.pack(">hi", 1, 1000) + b"\xff\xff\xff\xff\x0f"
    records_len = (struct.pack(">hhi", -1, 1, 1000) + struct.pack(">i", 1)
                   + struct.pack(">h", 1) + b"t" + struct.pack(">i", 1)
                   + struct.pack(">i", 0) + struct.pack(">i", 0x7FFFFFFF) + b"x" * 10)
    for data, version in ((huge_array, 3), (huge_string, 3), (huge_compact, 9),
                          (records_len, 3)):
        with pytest.raises(ProtocolError, match="remain"):
            ProduceRequest.decode(data, version)
        assert_bounded_work(ProduceRequest, data, version)
        peak = _frame_peak_bytes(lambda d=data, v=version: _decode_or_protocol_error(
            ProduceRequest, d, v))
        assert peak < 64 * 1024


def test_negative_counts_and_lengths_fail() -> None:
    base = struct.pack(">hhi", -1, 1, 1000)
    with pytest.raises(ProtocolError, match="invalid array length -2"):
        ProduceRequest.decode(base + struct.pack(">i", -2), 3)
    with pytest.raises(ProtocolError, match="invalid array length -1"):
        ProduceRequest.decode(base + struct.pack(">i", -1), 3)  # topics are not nullable
    with pytest.raises(ProtocolError, match="invalid string length -3"):
        ProduceRequest.decode(struct.pack(">h", -3) + base[2:], 3)
    topic = struct.pack(">i", 1) + struct.pack(">h", -1)  # non-nullable topic name is null
    with pytest.raises(ProtocolError, match="non-nullable"):
        ProduceRequest.decode(base + topic, 3)
    part = (struct.pack(">i", 1) + struct.pack(">h", 1) + b"t" + struct.pack(">i", 1)
            + struct.pack(">i", 0) + struct.pack(">i", -7))
    with pytest.raises(ProtocolError, match="invalid bytes length -7"):
        ProduceRequest.decode(base + part, 3)
    # MetadataRequest topics: null is allowed from v1, not in v0.
    assert MetadataRequest.decode(struct.pack(">i", -1), 1).topics is None
    with pytest.raises(ProtocolError):
        MetadataRequest.decode(struct.pack(">i", -1), 0)


def test_over_long_varint_fails() -> None:
    with pytest.raises(ProtocolError, match="longer than 5 bytes"):
        ApiVersionsRequest.decode(b"\x80\x80\x80\x80\x80\x80\x01", 3)
    with pytest.raises(ProtocolError, match="32 bits"):
        ApiVersionsRequest.decode(b"\xff\xff\xff\xff\x7f", 3)


def test_unknown_tagged_fields_are_skipped_and_trailing_bytes_ignored() -> None:
    body = ApiVersionsRequest(client_software_name="c", client_software_version="1").encode(3)
    assert body.endswith(b"\x00")
    with_tags = body[:-1] + b"\x02" + b"\x05\x02zz" + b"\x63\x00"  # tags 5 and 99 unknown
    decoded, end = ApiVersionsRequest.decode_at(with_tags + b"trailing", 3)
    assert decoded == ApiVersionsRequest(client_software_name="c", client_software_version="1")
    assert end == len(with_tags)
    with pytest.raises(ProtocolError, match="remain"):
        ApiVersionsRequest.decode(body[:-1] + b"\x01\x05\x09zz", 3)  # tag size past the end


def test_unsupported_versions() -> None:
    with pytest.raises(UnsupportedVersionError):
        ProduceRequest.decode(b"", ProduceRequest.HIGHEST_VERSION + 1)
    with pytest.raises(UnsupportedVersionError):
        ProduceRequest().encode(-1)
    # Non-default, non-ignorable field at a version without it (Kafka's
    # UnsupportedVersionException); an ignorable one is silently dropped.
    with pytest.raises(UnsupportedVersionError, match="TransactionalId"):
        ProduceRequest(transactional_id="tx").encode(2)
    dropped = OffsetCommitRequest(group_id="g", retention_time_ms=77)  # ignorable, v2-4
    assert OffsetCommitRequest.decode(dropped.encode(5), 5).retention_time_ms == -1


def test_encode_rejects_null_in_non_nullable_and_out_of_range() -> None:
    with pytest.raises(ProtocolError, match="non-nullable"):
        ProduceRequest(topic_data=[ProduceRequest.TopicProduceData(name=None)]).encode(9)  # type: ignore[arg-type]
    with pytest.raises(ProtocolError, match="cannot encode"):
        ProduceRequest(acks=1 << 20).encode(9)
