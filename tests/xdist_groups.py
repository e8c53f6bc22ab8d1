"""Which tests share a pytest-xdist worker: ``scripts/test`` runs the suite with
``-n N --dist loadfile``, and ``tests/conftest.py`` hands xdist the scheduler below.

xdist's ``loadfile`` gives each worker whole test files (a module's fixtures are made once,
as in a serial run). ``GroupedFileScheduling`` does the same, except that the files of one
group in ``GROUPS`` form a single unit, run one after another on one worker: tests that
must not overlap each other. Any other file may run beside them on another worker.

Why not ``--dist loadgroup`` and ``xdist_group`` marks: pytest-xdist 3.8 tells its
scheduler a test's group by appending ``@group`` to the test's node id on the worker
(``item._nodeid``), which pytest 9.2's structured node ids no longer read: the marks are
silently ignored and grouped tests are spread over the workers (pytest-xdist issue #1386,
still open). Groups by path need nothing from the worker: the controller's scheduler reads
them from the node ids it is given.

Session-scoped fixtures run once per worker, each with its own ``tmp_path_factory`` base
(``.../popen-gwN``), free ports and ZooKeeper chroots, so workers never share a directory,
a port or a znode.
"""

from __future__ import annotations

from typing import Final

from xdist.scheduler import LoadFileScheduling

# A path relative to the repository root (a directory ends in "/") -> its group.
GROUPS: Final[dict[str, str]] = {
    # The cluster tests share their worker's session-scoped ZooKeeper server and 3-node
    # ensemble (tests/cluster/conftest.py: one set of JVMs for the run, not one per worker)
    # and time failovers against 6 s ZooKeeper sessions with SIGSTOPs and kills: two of them
    # at once would be two 3-broker clusters failing over together on two cores.
    "tests/cluster/": "cluster",
    # The fault campaign and the namespace test make a bridge and network namespaces (each
    # picks a free 10.x /24 by reading the host's addresses: two at once could pick the same
    # one), and the campaign waits out 4 s ZooKeeper sessions: one at a time.
    "tests/chaos/test_ci_campaign.py": "chaos",
    "tests/chaos/test_netns.py": "chaos",
}


def group_of(path: str) -> str | None:
    """The group of the test file at ``path`` (relative to the repository root), if any."""
    for prefix, group in GROUPS.items():
        if path == prefix or (prefix.endswith("/") and path.startswith(prefix)):
            return group
    return None


class GroupedFileScheduling(LoadFileScheduling):
    """xdist's ``loadfile`` with the files of a group in ``GROUPS`` as one work unit."""

    def _split_scope(self, nodeid: str) -> str:
        path = nodeid.split("::", 1)[0]
        group = group_of(path)
        return f"group:{group}" if group is not None else path
