"""controller.zk_client keeps kazoo behind it: each kazoo error becomes the project's own,
naming the znode's path; anything else passes through unchanged."""

from __future__ import annotations

import kazoo.exceptions as kz
import pytest

from controller import zk_client as zc


@pytest.mark.parametrize(("kazoo_error", "ours", "message"), [
    (kz.NoNodeError, zc.ZkNoNode, "no znode (/a)"),
    (kz.NodeExistsError, zc.ZkNodeExists, "znode exists (/a)"),
    (kz.BadVersionError, zc.ZkBadVersion, "znode version changed (/a)"),
    (kz.NotEmptyError, zc.ZkNotEmpty, "znode has children (/a)"),
    (kz.ConnectionClosedError, zc.ZkClosed, "ZooKeeper client closed (/a)"),
    (kz.SessionExpiredError, zc.ZkSessionExpired, "ZooKeeper session expired (/a)"),
    (kz.RolledBackError, zc.ZkRolledBack,
     "rolled back (another operation of the transaction failed) (/a)"),
])
def test_kazoo_errors_become_ours(kazoo_error: type[Exception], ours: type[Exception],
                                  message: str) -> None:
    translated = zc._translate(kazoo_error(), "/a")
    assert type(translated) is ours
    assert str(translated) == message


def test_other_kazoo_errors_and_foreign_ones() -> None:
    other = zc._translate(kz.AuthFailedError("denied"), "")
    assert type(other) is zc.ZkError
    assert str(other) == "AuthFailedError: denied"
    foreign = ValueError("x")
    assert zc._translate(foreign, "/a") is foreign
