"""The one exception the client raises: ``ClientError``, a Kafka error code or a failed exchange.

``error_name`` is Kafka's name for the error (``ErrorCode`` names: ``NOT_LEADER_OR_FOLLOWER``,
``NETWORK_EXCEPTION``, ``REQUEST_TIMED_OUT``, ...), or ``INVALID_CONFIG`` for a bad client
setting. ``retriable`` follows Kafka's ``RetriableException`` classes (``protocol.errors.RETRIABLE``):
a retriable error may succeed when tried again, after a metadata refresh when it says the
cluster changed (``needs_metadata``).
"""

from __future__ import annotations

from typing import Final

from protocol.errors import RETRIABLE, ErrorCode

# Errors that mean the client's picture of the cluster is stale: refresh metadata first.
STALE_METADATA: Final = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.REPLICA_NOT_AVAILABLE,
    ErrorCode.NOT_CONTROLLER, ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.NETWORK_EXCEPTION, ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.LISTENER_NOT_FOUND,
})


def error_name(code: int) -> str:
    """Kafka's name of an error code (``UNKNOWN_ERROR_<n>`` for a code we do not know)."""
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"UNKNOWN_ERROR_{code}"


class ClientError(Exception):
    """A failed call: ``error_name`` is Kafka's name for what went wrong."""

    def __init__(self, error_name: str, message: str) -> None:
        super().__init__(message)
        self.error_name = error_name

    @classmethod
    def from_code(cls, code: int, message: str | None, what: str) -> ClientError:
        name = error_name(code)
        return cls(name, message or f"{what}: {name}")

    @property
    def error_code(self) -> ErrorCode | None:
        return ErrorCode.__members__.get(self.error_name)

    @property
    def retriable(self) -> bool:
        return self.error_code in RETRIABLE

    @property
    def needs_metadata(self) -> bool:
        return self.error_code in STALE_METADATA


def check(code: int, message: str | None, what: str) -> None:
    """Raise ``ClientError`` for a non-zero error code (``what`` names the call)."""
    if code != 0:
        raise ClientError.from_code(code, message, what)


def network_error(message: str) -> ClientError:
    return ClientError(ErrorCode.NETWORK_EXCEPTION.name, message)


def timeout_error(message: str) -> ClientError:
    return ClientError(ErrorCode.REQUEST_TIMED_OUT.name, message)
