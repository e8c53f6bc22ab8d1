"""Metadata answers spliced from topic entries encoded once per metadata snapshot.

A Metadata answer for many partitions is almost all topic entries (leader, epoch,
replicas, ISR per partition), and those change only when the metadata cache does. So each
topic's entry is built and encoded once per ``MetadataSnapshot`` (``broker.metadata_cache``)
and kept in the snapshot's ``memo``, keyed by (listener, API version, topic): an
UpdateMetadata swaps in a new snapshot with an empty memo, so no entry outlives the state
it shows (topics, partitions, leaders, ISR, live brokers and their listeners are all in
the snapshot). A repeated answer is then the envelope (brokers, cluster id, controller id,
throttle time: encoded per request) with the cached entries copied in.

Not cached (decided per request by the handler): authorization, which topics are asked
for, auto-creation, error entries.

Wire layout relied on (MetadataResponse, every version; checked against the generated
codec in the tests): the Topics array is the last field but ClusterAuthorizedOperations
(int32, v8-10) and the tagged-field section (v9+; one byte 0 as minikafka writes none).
The array's length is an int32 (v0-8) or an unsigned varint of length + 1 (v9+); both
are one fixed size for 0 and 1 elements, which ``encode_topic_entry`` uses to cut an
entry out of a one-topic answer.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Final

from protocol.fileslice import ResponseParts
from protocol.messages.metadata import MetadataResponse
from protocol.primitives import uvarint

__all__ = ["CachedMetadataResponse", "encode_topic_entry"]

Topic = MetadataResponse.MetadataResponseTopic

_INT32: Final = struct.Struct(">i")
FLEXIBLE_FROM: Final = 9  # MetadataResponse's flexible versions
_EMPTY_ENVELOPES: dict[int, bytes] = {}  # version -> MetadataResponse() encoded (constant)


def _tail_bytes(version: int) -> int:
    """Bytes after the Topics array: ClusterAuthorizedOperations, the tagged fields."""
    return (4 if 8 <= version <= 10 else 0) + (1 if version >= FLEXIBLE_FROM else 0)


def _count_bytes(version: int) -> int:
    return 1 if version >= FLEXIBLE_FROM else 4  # uvarint(0 + 1) or int32 0


def _encode_count(version: int, n: int) -> bytes:
    return uvarint(n + 1) if version >= FLEXIBLE_FROM else _INT32.pack(n)


def _only(parts: ResponseParts) -> bytes | bytearray:
    (only,) = parts  # a Metadata answer holds no file slices
    if not isinstance(only, bytes | bytearray):
        raise TypeError(f"unexpected part {type(only).__name__} in a Metadata answer")
    return only


def encode_topic_entry(topic: Topic, version: int) -> bytes:
    """``topic`` as it is encoded inside a Metadata answer of ``version``."""
    empty = _EMPTY_ENVELOPES.get(version)
    if empty is None:
        empty = _EMPTY_ENVELOPES[version] = bytes(_only(MetadataResponse().encode_parts(version)))
    one = _only(MetadataResponse(topics=[topic]).encode_parts(version))
    tail = _tail_bytes(version)
    start = len(empty) - tail  # the envelope before the entry is the empty one's
    return bytes(one[start:len(one) - tail])


@dataclass(slots=True)
class CachedMetadataResponse(MetadataResponse):
    """A Metadata answer whose ``topics`` come with their encodings (``encoded_topics``,
    same order and length, from ``encode_topic_entry`` at the version it is sent at).

    ``topics`` stays the answer's content for everything that reads it (error counts,
    request logs); its entries may be shared with other answers of the same snapshot, so
    nothing may change them. Encoding writes the envelope with the generated codec and
    copies the entries in; an answer whose lists disagree in length is encoded in full."""

    encoded_topics: list[bytes] = field(default_factory=list)

    def encode_parts(self, version: int) -> ResponseParts:
        entries = self.encoded_topics
        if len(entries) != len(self.topics):
            return MetadataResponse.encode_parts(self, version)
        envelope = _only(MetadataResponse(
            throttle_time_ms=self.throttle_time_ms, brokers=self.brokers,
            cluster_id=self.cluster_id, controller_id=self.controller_id,
            cluster_authorized_operations=self.cluster_authorized_operations,
        ).encode_parts(version))
        at = len(envelope) - _tail_bytes(version) - _count_bytes(version)
        if envelope[at:at + _count_bytes(version)] != _encode_count(version, 0):
            raise ValueError(f"MetadataResponse v{version}: Topics is not where expected")
        return [b"".join((envelope[:at], _encode_count(version, len(entries)), *entries,
                          envelope[at + _count_bytes(version):]))]
