"""Producer id blocks from ZooKeeper (Kafka's ``ZkProducerIdManager``), so that no two
brokers of a cluster hand out the same producer id: an idempotent producer's id must stay
unique when its partitions move to another leader.

``/latest_producer_id_block`` holds the last block given to any broker (Kafka's
``ProducerIdBlockZNode``, version 1)::

    {"version":1,"broker":<id>,"block_start":"<first id>","block_end":"<last id>"}

(the ids as JSON strings, the last one inclusive). A broker claims the next block with a
version-checked write, and reads and tries again when another broker won the race.
"""

from __future__ import annotations

import json
import logging
from typing import Final, Protocol

from controller import zk_data as zd
from controller.zk_client import ZkBadVersion, ZkClient, ZkNodeExists

log = logging.getLogger(__name__)

BLOCK_VERSION: Final = 1
MAX_ATTEMPTS: Final = 100  # writes lost to other brokers in a row before giving up


def encode_block(broker_id: int, start: int, end: int) -> bytes:
    return json.dumps({"version": BLOCK_VERSION, "broker": broker_id,
                       "block_start": str(start), "block_end": str(end)},
                      separators=(",", ":")).encode()


def decode_block_end(data: bytes | None) -> int:
    """The last id of the block a znode holds (-1 for an empty znode)."""
    if not data:
        return -1
    value = json.loads(data)
    return int(value["block_end"])


async def claim_block(zk: ZkClient, broker_id: int, size: int) -> tuple[int, int]:
    """A new block [start, end) of ``size`` ids for ``broker_id``."""
    for _ in range(MAX_ATTEMPTS):
        found = await zk.get_or_none(zd.LATEST_PRODUCER_ID_BLOCK)
        if found is None:
            try:
                await zk.create(zd.LATEST_PRODUCER_ID_BLOCK,
                                encode_block(broker_id, 0, size - 1))
            except ZkNodeExists:
                continue
            start = 0
        else:
            data, stat = found
            start = decode_block_end(data) + 1
            try:
                await zk.set(zd.LATEST_PRODUCER_ID_BLOCK,
                             encode_block(broker_id, start, start + size - 1), stat.version)
            except ZkBadVersion:
                continue
        log.info("Acquired new producerId block [%d, %d] for broker %d", start,
                 start + size - 1, broker_id)
        return start, start + size
    raise RuntimeError(f"could not claim a producer id block in {MAX_ATTEMPTS} attempts")


class _HasZk(Protocol):
    @property
    def zk(self) -> ZkClient: ...


async def claim_block_of_session(session: _HasZk, broker_id: int, size: int) -> tuple[int, int]:
    """``claim_block`` on a broker session's current ZooKeeper client."""
    return await claim_block(session.zk, broker_id, size)
