"""Helpers for tests against a real ZooKeeper: kazoo clients and forced session expiry.

``expire_session(client)`` ends ``client``'s session the way a real expiry does, without
waiting for the session timeout: a second ``KazooClient`` joins the same session
(``client_id=(session id, password)``) and closes it. The server then deletes the session's
ephemeral znodes and fires their watches; ``client`` sees ``KazooState.LOST`` (kazoo's
name for an expired session) when it next talks to the server.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException

CONNECT_TIMEOUT_S = 15.0
EXPIRY_WAIT_S = 15.0


def kazoo_client(hosts: str, *, session_timeout_s: float = 6.0) -> KazooClient:
    """A started client; stop() it when done. ``hosts`` may end in ``/chroot``, which is
    created first if missing (as a broker does with ``zookeeper.connect``)."""
    servers, slash, chroot = hosts.partition("/")
    if slash and chroot:
        root = KazooClient(hosts=servers, timeout=session_timeout_s)
        root.start(timeout=CONNECT_TIMEOUT_S)
        try:
            root.ensure_path("/" + chroot)
        finally:
            root.stop()
            root.close()
    client = KazooClient(hosts=hosts, timeout=session_timeout_s)
    client.start(timeout=CONNECT_TIMEOUT_S)
    return client


def expire_session(client: KazooClient, *, wait_s: float = EXPIRY_WAIT_S) -> None:
    """Force ``client``'s session to expire now; returns once ``client`` has seen it."""
    session_id, password = client.client_id
    lost = threading.Event()

    def listener(state: str) -> bool:
        if state == KazooState.LOST:
            lost.set()
            return True  # remove the listener
        return False

    client.add_listener(listener)
    hosts = ",".join(f"{host}:{port}" for host, port in client.hosts)
    twin = KazooClient(hosts=hosts, client_id=(session_id, password))
    twin.start(timeout=CONNECT_TIMEOUT_S)
    twin.stop()  # closeSession: the server ends the shared session
    twin.close()
    # The first client learns of it on its next exchange with the server (a ping at the
    # latest, within a third of the session timeout); a sync makes that immediate.
    with contextlib.suppress(KazooException):  # the session is gone: that is the point
        client.sync("/")
    if not lost.wait(wait_s):
        client.remove_listener(listener)
        raise AssertionError(f"session 0x{session_id:x} did not expire within {wait_s} s")


def wait_until(predicate: Callable[[], bool], *, timeout_s: float, what: str,
               interval_s: float = 0.05) -> None:
    """Poll ``predicate`` until true; AssertionError naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(interval_s)
