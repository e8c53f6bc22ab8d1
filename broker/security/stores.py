"""Where a broker keeps its security state: user / client-id configs (SCRAM credentials,
quotas) and, with an authorizer, ACLs.

- a single node (no ``zookeeper.connect``): files in the log dir (``LocalEntityConfigStore``,
  ``LocalAclStore``);
- a cluster: Kafka's znodes through the broker's ZooKeeper session
  (``ZkEntityConfigStore``, ``ZkAclStore``), read at start-up, then kept current by
  ZooKeeper's change notifications, so what one broker changes every broker applies.

``open_security_stores`` fails with SecurityStoreError (a file or znode that does not parse,
ZooKeeper not answering), which fails start-up. ``close`` stops the ZooKeeper watches
(before the session closes). The ZooKeeper stores (and kazoo) are imported only for a
cluster: a single node's start-up does not load them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from broker.security.acl_store import AclStore, AclStoreError, LocalAclStore
from broker.security.entity_store import EntityConfigStore, EntityStoreError, LocalEntityConfigStore

if TYPE_CHECKING:
    from controller.zk_client import ZkClient


class SecurityStoreError(RuntimeError):
    """The security state cannot be read."""


@dataclass(slots=True)
class SecurityStores:
    entity_configs: EntityConfigStore
    acls: AclStore | None
    _closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    async def close(self) -> None:
        for close in self._closers:
            await close()


async def open_security_stores(log_dir: Path, zk: ZkClient | None, *,
                               with_acls: bool) -> SecurityStores:
    if zk is not None:
        return await _open_zk_stores(zk, with_acls=with_acls)
    try:
        return SecurityStores(LocalEntityConfigStore.load(log_dir),
                              LocalAclStore.in_log_dir(log_dir) if with_acls else None)
    except (EntityStoreError, AclStoreError) as exc:
        raise SecurityStoreError(str(exc)) from None


async def _open_zk_stores(zk: ZkClient, *, with_acls: bool) -> SecurityStores:
    from broker.security.zk_acl_store import ZkAclStore
    from broker.security.zk_entity_store import ZkEntityConfigStore
    from controller.zk_client import ZkError
    from controller.zk_data import ZkDataError

    try:
        entities = ZkEntityConfigStore(zk)
        stores = SecurityStores(entities, None, [entities.close])
        try:
            await entities.start()
            if with_acls:
                acls = ZkAclStore(zk)
                stores.acls = acls
                stores._closers.append(acls.close)
                await acls.start()
        except BaseException:
            await stores.close()
            raise
        return stores
    except (EntityStoreError, AclStoreError, ZkDataError) as exc:
        raise SecurityStoreError(str(exc)) from None
    except ZkError as exc:
        raise SecurityStoreError(f"cannot read the security configs from ZooKeeper: {exc}") from None
