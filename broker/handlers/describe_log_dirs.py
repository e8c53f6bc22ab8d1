"""DescribeLogDirs: v1-4

Behavior:
- One result per log dir in ``log.dirs`` (absolute paths, in configuration order), each
  with the hosted partitions that live there: every one (Topics null) or the ones asked
  for (unknown ones left out, as Kafka does). A partition's size is the bytes of its
  segment ``.log`` files, offset lag 0 (the leader is its own replica), never a future
  replica.
- An offline log dir (its disk failed: ``storage.log_dir_failure``) -> KAFKA_STORAGE_ERROR
  for that dir, with no topics, as Kafka answers; so does a dir that cannot be read now.
- v4 totals: the file system's total and usable bytes (``statvfs``).

Version notes:
- v1 baseline (throttle time); v2 flexible; v3 top-level error code; v4 total and usable
  bytes.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from pathlib import Path

from broker.handlers.authz import authorize_cluster
from broker.handlers.base import HandlerResult, RequestContext, Respond, api
from broker.security.acl import AclOperation as Op
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
    if not authorize_cluster(ctx, Op.DESCRIBE):
        return Respond(DescribeLogDirsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                               results=[]))
    log_manager = broker.log_manager
    wanted: Iterable[tuple[str, list[int]]]
    if request.topics is None:
        hosted: dict[str, list[int]] = {}
        for tp in sorted(broker.replica_manager.partitions):
            hosted.setdefault(tp.topic, []).append(tp.partition)
        wanted = list(hosted.items())
    else:
        wanted = [(t.topic, list(t.partitions)) for t in request.topics]
    where: dict[Path, list[tuple[str, int]]] = {}
    for name, partitions in wanted:
        for index in partitions:
            partition = broker.replica_manager.get_partition(name, index)
            if partition is not None:
                where.setdefault(partition.log.log_dir, []).append((name, index))
    results: list[Response.DescribeLogDirsResult] = []
    for log_dir in log_manager.log_dirs:
        path = str(log_dir.resolve())
        if log_manager.is_offline(log_dir):
            results.append(Response.DescribeLogDirsResult(
                error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir=path))
            continue
        result = Response.DescribeLogDirsResult(error_code=ErrorCode.NO_ERROR, log_dir=path)
        try:
            topics: dict[str, list[Response.DescribeLogDirsPartition]] = {}
            for name, index in where.get(log_dir, []):
                size = partition_size_bytes(log_dir / f"{name}-{index}")
                topics.setdefault(name, []).append(Response.DescribeLogDirsPartition(
                    partition_index=index, partition_size=size, offset_lag=0,
                    is_future_key=False))
            result.topics = [Response.DescribeLogDirsTopic(name=n, partitions=p)
                             for n, p in topics.items()]
            usage = os.statvfs(log_dir)
            result.total_bytes = usage.f_blocks * usage.f_frsize
            result.usable_bytes = usage.f_bavail * usage.f_frsize
        except OSError as exc:
            log.warning("DescribeLogDirs: cannot read log dir %s: %s", path, exc)
            result = Response.DescribeLogDirsResult(error_code=ErrorCode.KAFKA_STORAGE_ERROR,
                                                    log_dir=path)
        results.append(result)
    return Respond(DescribeLogDirsResponse(error_code=ErrorCode.NO_ERROR, results=results))
