"""A broker's place in ZooKeeper: top-level paths, the cluster id, its registration.

As Kafka's ``KafkaServer.startup`` and ``KafkaZkClient`` do it:

- ``create_top_level_paths``: the persistent parents every broker makes sure of
  (``zk_data.PERSISTENT_PATHS``, created with no data).
- ``get_or_create_cluster_id(zk, proposed)``: ``/cluster/id`` is created once, by the first
  broker; every later broker reads it. ``check_cluster_id`` compares it with the log dir's
  ``meta.properties`` (a broker pointed at another cluster's ZooKeeper must not start).
- ``register_broker``: the ephemeral ``/brokers/ids/<id>``, created the way Kafka's
  ``CheckedEphemeral`` does (a transaction: create with no data, then set the JSON at version
  0). The broker epoch is the znode's czxid. When the znode exists, it is ours only if our
  own session owns it (a retry after a lost connection); otherwise another broker, or a
  killed one whose session has not expired yet, holds the id: ``DuplicateBrokerIdError``.
  After a session expiry the znode is gone and the broker registers again (a new czxid, so
  a new epoch): the controller sees the broker leave and come back.
"""

from __future__ import annotations

import logging

from controller import zk_data as zd
from controller.zk_client import (
    CreateOp,
    SetDataOp,
    ZkClient,
    ZkError,
    ZkNodeExists,
    ZnodeStat,
)

log = logging.getLogger(__name__)


class DuplicateBrokerIdError(ZkError):
    """``/brokers/ids/<id>`` is held by another session."""


class InconsistentClusterIdError(ZkError):
    """``meta.properties`` names another cluster than ``/cluster/id``."""


async def create_top_level_paths(zk: ZkClient) -> None:
    for path in zd.PERSISTENT_PATHS:
        await zk.create_persistent(path, exist_ok=True)


async def get_or_create_cluster_id(zk: ZkClient, proposed: str) -> str:
    """``/cluster/id``: create it with ``proposed``, or read the one already there."""
    try:
        await zk.create_persistent(zd.CLUSTER_ID, zd.encode_cluster_id(proposed))
        log.info("Created %s with cluster id %s", zd.CLUSTER_ID, proposed)
        return proposed
    except ZkNodeExists:
        data, _ = await zk.get(zd.CLUSTER_ID)
        return zd.decode_cluster_id(data)


def check_cluster_id(zk_cluster_id: str, stored: str | None, meta_path: str) -> None:
    """Kafka's meta.properties verification against the cluster id from ZooKeeper."""
    if stored is not None and stored != zk_cluster_id:
        raise InconsistentClusterIdError(
            f"Invalid cluster.id in: {meta_path}. Expected {zk_cluster_id}, but read {stored}: "
            "this log directory belongs to another cluster (is zookeeper.connect, with its "
            "chroot, the right one?)")


async def register_broker(zk: ZkClient, registration: zd.BrokerRegistration) -> int:
    """Create the ephemeral registration; returns the broker epoch (the znode's czxid)."""
    path = registration.path
    results = await zk.multi([CreateOp(path, None, ephemeral=True),
                              SetDataOp(path, registration.encode(), 0)])
    error = next((r for r in results if isinstance(r, ZkError)), None)
    if error is None:
        stat = results[1]
        assert isinstance(stat, ZnodeStat)
        epoch = stat.czxid
    elif isinstance(results[0], ZkNodeExists):
        epoch = await _owned_registration(zk, registration)
    else:
        raise error
    log.info("Registered broker %d at path %s with addresses: %s, czxid (broker epoch): %d",
             registration.broker_id, path,
             ",".join(e.connection_string for e in registration.endpoints), epoch)
    return epoch


async def _owned_registration(zk: ZkClient, registration: zd.BrokerRegistration) -> int:
    path = registration.path
    found = await zk.get_or_none(path)
    if found is None:  # it went away meanwhile (its session ended): try again, once
        results = await zk.multi([CreateOp(path, None, ephemeral=True),
                                  SetDataOp(path, registration.encode(), 0)])
        stat = results[1]
        if isinstance(stat, ZnodeStat):
            return stat.czxid
        raise _duplicate(registration.broker_id, path, None, zk.session_id)
    _, stat = found
    if stat.ephemeral_owner == zk.session_id:
        return stat.czxid
    raise _duplicate(registration.broker_id, path, stat.ephemeral_owner, zk.session_id)


def _duplicate(broker_id: int, path: str, owner: int | None, session: int) -> DuplicateBrokerIdError:
    holder = f"session 0x{owner:x}" if owner is not None else "another session"
    return DuplicateBrokerIdError(
        f"Broker id {broker_id} is already registered in ZooKeeper ({path} is held by {holder}, "
        f"not this broker's session 0x{session:x}): another broker runs with broker.id="
        f"{broker_id}, or one was stopped without shutting down and its ZooKeeper session has "
        "not expired yet (zookeeper.session.timeout.ms)")
