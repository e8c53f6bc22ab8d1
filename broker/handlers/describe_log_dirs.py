"""DescribeLogDirs: v1-4

Behavior:
- One result: this broker's single log dir (absolute path), with every hosted partition
  (Topics null) or the partitions asked for (unknown ones left out, as Kafka does). Each
  partition's size is the bytes of its segment ``.log`` files, offset lag 0 (the leader
  is its own replica), never a future replica.
- v4 totals: the file system's total and usable bytes (``statvfs``).
- A log dir that cannot be read -> KAFKA_STORAGE_ERROR for that dir.

Version notes:
- v1 baseline (throttle time); v2 flexible; v3 top-level error code; v4 total and usable
  bytes.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from pathlib import Path

from broker.handlers.base import HandlerResult, RequestContext, Respond, api
from protocol.errors import ErrorCode
from protocol.messages.describe_log_dirs import DescribeLogDirsRequest, DescribeLogDirsResponse

log = logging.getLogger(__name__)

Response = DescribeLogDirsResponse


def partition_size_bytes(partition_dir: Path) -> int:
    """Bytes of the segment ``.log`` files of one partition directory (Kafka's Log.size)."""
    total = 0
    try:
        with os.scandir(partition_dir) as entries:
            for entry in entries:
                if entry.name.endswith(".log") and entry.is_file():
                    total += entry.stat().st_size
    except FileNotFoundError:
        return 0
    return total


@api(DescribeLogDirsRequest.API_KEY, min_version=1, max_version=4, request=DescribeLogDirsRequest)
async def handle_describe_log_dirs(
    ctx: RequestContext, request: DescribeLogDirsRequest
) -> HandlerResult:
    broker = ctx.broker
    log_dir = Path(broker.config.log_dir).resolve()
    wanted: Iterable[tuple[str, list[int]]]
    if request.topics is None:
        hosted: dict[str, list[int]] = {}
        for tp in sorted(broker.replica_manager.partitions):
            hosted.setdefault(tp.topic, []).append(tp.partition)
        wanted = list(hosted.items())
    else:
        wanted = [(t.topic, list(t.partitions)) for t in request.topics]
    result = Response.DescribeLogDirsResult(error_code=ErrorCode.NO_ERROR, log_dir=str(log_dir))
    try:
        topics: dict[str, list[Response.DescribeLogDirsPartition]] = {}
        for name, partitions in wanted:
            for index in partitions:
                if broker.replica_manager.get_partition(name, index) is None:
                    continue
                size = partition_size_bytes(log_dir / f"{name}-{index}")
                topics.setdefault(name, []).append(Response.DescribeLogDirsPartition(
                    partition_index=index, partition_size=size, offset_lag=0, is_future_key=False))
        result.topics = [Response.DescribeLogDirsTopic(name=n, partitions=p) for n, p in topics.items()]
        usage = os.statvfs(log_dir)
        result.total_bytes = usage.f_blocks * usage.f_frsize
        result.usable_bytes = usage.f_bavail * usage.f_frsize
    except OSError as exc:
        log.warning("DescribeLogDirs: cannot read log dir %s: %s", log_dir, exc)
        result = Response.DescribeLogDirsResult(error_code=ErrorCode.KAFKA_STORAGE_ERROR,
                                                log_dir=str(log_dir))
    return Respond(DescribeLogDirsResponse(error_code=ErrorCode.NO_ERROR, results=[result]))
