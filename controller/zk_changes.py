"""Reading Kafka's change-notification znodes, as its ZkNodeChangeNotificationListener does:
what the ZooKeeper stores that watch a sequence of notifications share.

A notification is a persistent sequential znode ``<prefix><10 digits>`` under a change
path (``/config/changes/config_change_0000000007``); a store remembers the last sequence
number it processed and reads only newer ones (``sequenced``). Notifications older than
``CHANGE_EXPIRY_MS`` are deleted by whichever broker sees them first (``purge_expired``).

``WatchTasks`` runs the work that (re-)arms a store's watches as event-loop tasks: one that
fails with a ``ZkError`` (ZooKeeper did not answer) is logged and run again
``REARM_RETRY_S`` later, unless the store or its ZooKeeper client is closed; ``close``
cancels them all and waits for them.

Thread-safety: the event loop only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Final

from controller import zk_data as zd
from controller.zk_client import ZkClient, ZkClosed, ZkError, ZkNoNode

CHANGE_EXPIRY_MS: Final = 15 * 60 * 1000  # Kafka's changeExpirationMs
REARM_RETRY_S: Final = 1.0


def sequenced(children: Iterable[str], prefix: str) -> list[tuple[int, str]]:
    """(sequence number, name) of each ``<prefix><sequence>`` child, in sequence order;
    other names are skipped."""
    out = []
    for child in children:
        try:
            out.append((zd.sequence_number(child, prefix), child))
        except zd.ZkDataError:
            continue
    return sorted(out)


async def purge_expired(zk: ZkClient, path: str, children: Iterable[tuple[int, str]],
                        now_ms: float) -> None:
    """Delete the notifications under ``path`` (``children`` as ``sequenced`` lists them)
    created more than ``CHANGE_EXPIRY_MS`` before ``now_ms``."""
    for _seq, child in children:
        stat = await zk.exists(f"{path}/{child}")
        if stat is not None and now_ms - stat.ctime_ms > CHANGE_EXPIRY_MS:
            with contextlib.suppress(ZkNoNode):  # another broker purged it first
                await zk.delete(f"{path}/{child}")


class WatchTasks:
    """The tasks that arm one store's watches. ``what`` names the watch in the warning
    logged on ``log`` when ZooKeeper fails it; ``task_name`` names the tasks."""

    def __init__(self, what: str, task_name: str, log: logging.Logger) -> None:
        self._what = what
        self._task_name = task_name
        self._log = log
        self._tasks: set[asyncio.Task[None]] = set()
        self.closed = False

    def spawn(self, work: Callable[[], Awaitable[None]]) -> None:
        """Run ``work()`` in a task (nothing once closed); on a ``ZkError`` run it again
        ``REARM_RETRY_S`` later."""
        if self.closed:
            return

        async def run() -> None:
            try:
                await work()
            except asyncio.CancelledError:
                raise
            except ZkError as exc:
                if self.closed or isinstance(exc, ZkClosed):
                    return
                self._log.warning("%s watch: %s; re-arming in %.0f s", self._what, exc,
                                  REARM_RETRY_S)
                await asyncio.sleep(REARM_RETRY_S)
                self.spawn(work)

        task = asyncio.get_running_loop().create_task(run(), name=self._task_name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        """No task starts from now on; the running ones are cancelled and waited for."""
        self.closed = True
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
