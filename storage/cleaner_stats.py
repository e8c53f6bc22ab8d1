"""What the log cleaner's broker side and its worker exchange about a cleaning, without the
record scanning: an active producer's last record (``LastRecord``, from the broker's
producer state) and what one cleaning read and wrote (``CleanerStats``).

Apart from ``storage.cleaner_filter`` (which fills them in, in the worker) so that the
broker can start the cleaner without loading the filter and the compiled record scan.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


class LastRecord(NamedTuple):
    """An active producer's last data offset (None if its last entry is a marker) and epoch
    (Kafka's ``LastRecord``)."""

    last_data_offset: int | None
    producer_epoch: int


@dataclass(slots=True)
class CleanerStats:
    """What one cleaning read and wrote (Kafka's ``CleanerStats``)."""

    start_s: float = 0.0
    map_done_s: float = 0.0
    end_s: float = 0.0
    bytes_read: int = 0
    bytes_written: int = 0
    map_bytes_read: int = 0
    map_messages_read: int = 0
    messages_read: int = 0
    messages_written: int = 0
    invalid_messages_read: int = 0
    buffer_utilization: float = 0.0

    @property
    def elapsed_s(self) -> float:
        return max(self.end_s - self.start_s, 1e-9)

    @property
    def elapsed_index_s(self) -> float:
        return max(self.map_done_s - self.start_s, 0.0)
