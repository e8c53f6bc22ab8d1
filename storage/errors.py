"""The errors storage raises, each carrying the Kafka error code a broker answers with.

``StorageError`` is the base; handlers map ``error_code`` straight into the response.
Corrupt files found while loading are not errors for the caller: the log manager
repairs them (truncates, rebuilds, ignores) and logs what it repaired.
"""

from __future__ import annotations

from typing import ClassVar

from protocol.errors import ErrorCode


class StorageError(Exception):
    """Base of every error storage raises on purpose."""

    error_code: ClassVar[ErrorCode] = ErrorCode.KAFKA_STORAGE_ERROR


class OffsetOutOfRangeError(StorageError):
    """A read or truncation below the log start offset or above the log end offset."""

    error_code = ErrorCode.OFFSET_OUT_OF_RANGE


class InvalidRecordError(StorageError):
    """A produce payload that is not a sequence of whole, valid magic-2 batches."""

    error_code = ErrorCode.CORRUPT_MESSAGE


class UnsupportedMessageFormatError(StorageError):
    """A legacy (magic 0/1) message set."""

    error_code = ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT


class RecordTooLargeError(StorageError):
    """A batch above ``max.message.bytes``."""

    error_code = ErrorCode.MESSAGE_TOO_LARGE


class InvalidTimestampError(StorageError):
    """A batch timestamp outside ``message.timestamp.before.max.ms`` / ``after.max.ms``."""

    error_code = ErrorCode.INVALID_TIMESTAMP


class NonContiguousOffsetsError(StorageError):
    """A follower append whose offsets do not start at the log end offset or go backwards."""

    error_code = ErrorCode.UNKNOWN_SERVER_ERROR


class CorruptIndexError(StorageError):
    """An index file that fails its sanity check (the segment rebuilds it)."""


class CorruptCheckpointError(StorageError):
    """A checkpoint file that does not parse (Kafka: "Malformed line in checkpoint file")."""


class LogConfigError(StorageError):
    """An unknown topic config name or an invalid value (Kafka answers INVALID_CONFIG)."""

    error_code = ErrorCode.INVALID_CONFIG


class InconsistentTopicIdError(StorageError):
    """A log was given a topic id other than the one it has (Kafka's
    ``InconsistentTopicIdException``)."""

    error_code = ErrorCode.INCONSISTENT_TOPIC_ID


class LogClosedError(StorageError):
    """An operation on a log that was closed or deleted."""


class CorruptSegmentError(StorageError):
    """A segment whose batch headers do not chain (found while reading or loading).

    Kafka answers a read that meets one with CORRUPT_MESSAGE (``CorruptRecordException``).
    """

    error_code = ErrorCode.CORRUPT_MESSAGE


class LogIOError(StorageError):
    """An operation failed on a full disk (ENOSPC, EDQUOT) and was rolled back: the log is
    exactly as before it, and the next operation may succeed once space is freed."""


class LogDirOfflineError(StorageError):
    """The log's directory went offline after an I/O error (Kafka's offline log dir):
    nothing is read or written there until the broker restarts."""
