"""The harness's network: a namespace per node on a bridge; a cut stops traffic between two
nodes while the host (the clients) still reaches both; heal restores it; close removes it."""

from __future__ import annotations

import ipaddress
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.chaos import netns

SERVER = """
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 7000)); s.listen(16); print("ready", flush=True)
while True:
    c, _ = s.accept(); c.sendall(b"hi"); c.close()
"""
CLIENT = """
import socket, sys
try:
    with socket.create_connection((sys.argv[1], 7000), timeout=1.5) as c:
        print(c.recv(2).decode())
except OSError as exc:
    print(type(exc).__name__)
"""


@pytest.fixture
def network() -> Iterator[netns.Network]:
    why = netns.available()
    if why is not None:
        pytest.skip(why)
    net = netns.Network()
    try:
        yield net
    finally:
        net.close()


def _from_host(ip: str) -> str:
    try:
        with socket.create_connection((ip, 7000), timeout=1.5) as conn:
            return conn.recv(2).decode()
    except OSError as exc:
        return type(exc).__name__


def _from(host: netns.Host, ip: str) -> str:
    out = subprocess.run([*host.wrapper, sys.executable, "-c", CLIENT, ip], capture_output=True,
                         text=True, timeout=20, check=True)
    return out.stdout.strip()


def test_cut_and_heal_between_two_namespaces(network: netns.Network) -> None:
    a = network.add_host("a")
    b = network.add_host("b")
    assert a.ip != b.ip and ipaddress.ip_address(a.ip) in network.subnet
    server = subprocess.Popen([*a.wrapper, sys.executable, "-c", SERVER, a.ip],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "ready"
        assert _from_host(a.ip) == "hi"
        assert _from(b, a.ip) == "hi"
        network.cut("a", "b")
        assert network.cuts() == {frozenset(("a", "b"))}
        assert _from(b, a.ip) == "TimeoutError"  # dropped silently, as in a partition
        assert _from_host(a.ip) == "hi"  # the clients still reach it
        network.heal()
        assert _from(b, a.ip) == "hi"
    finally:
        server.kill()
        server.wait(timeout=10)
    names = [h.netns for h in (a, b)]
    network.close()
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                            check=True).stdout
    assert not any(name in listed for name in names)
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True,
                           check=True).stdout
    assert network.bridge not in links
