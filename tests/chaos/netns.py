"""Network namespaces for the fault harness: one per broker and ZooKeeper node, on a bridge.

Layout of one run (``R`` is the harness's pid, so concurrent runs never share a name)::

    host (root namespace): bridge mkcRbr, address 10.A.B.1/24 (the harness and its clients)
      veth mkcRvN (on the bridge)  <->  eth0 in namespace mkcR-<name>, 10.A.B.(N+1)/24, lo up

``10.A.B.0/24`` is a subnet of 10.200.0.0-10.249.255.0 that no address or route of the host
overlaps. Every node reaches every other node, and the host reaches every node, over the
bridge; nothing leaves it (no route out, no forwarding to other interfaces).

A cut between two nodes is an address added to a set in *both* nodes' namespaces: nftables
table ``inet chaos`` drops input from and output to the set's addresses (no reset, no ICMP:
peers see a silent network, as in a real partition), so the host and its clients still reach
both. ``heal()`` empties every set. The host's own firewall and routes are never touched
(apart from the bridge's connected /24).

``close()`` deletes the namespaces (their veth ends go with them) and the bridge. A run that
died without closing leaves names whose pid no longer exists: ``remove_stale()`` deletes
those, and only those (another live run's names are left alone).

Needs root (CAP_NET_ADMIN) and the ``ip`` and ``nft`` commands; ``available()`` says whether
this process can.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from typing import Final

PREFIX: Final = "mkc"
COMMAND_TIMEOUT_S: Final = 20.0
MAX_NODES: Final = 250
_NAME = re.compile(rf"^{PREFIX}(\d+)")

NFT_TABLE: Final = """\
table inet chaos {
  set blocked { type ipv4_addr; }
  chain input { type filter hook input priority 0; policy accept; ip saddr @blocked drop; }
  chain output { type filter hook output priority 0; policy accept; ip daddr @blocked drop; }
}
"""


class NetnsError(RuntimeError):
    """An ``ip`` or ``nft`` command failed; the message carries its output."""


def _run(*argv: str, input_text: str | None = None, check: bool = True) -> str:
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S,
                                input=input_text, check=False)
    except subprocess.TimeoutExpired:
        raise NetnsError(f"{' '.join(argv)}: no answer in {COMMAND_TIMEOUT_S:.0f} s") from None
    if check and result.returncode != 0:
        raise NetnsError(f"{' '.join(argv)} exited with {result.returncode}: "
                         f"{result.stderr.strip() or result.stdout.strip()}")
    return result.stdout


def available() -> str | None:
    """None when namespaces can be made here, else why not."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "nft"):
        if shutil.which(tool) is None:
            return f"the {tool!r} command is missing"
    return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale() -> list[str]:
    """Delete namespaces and links of earlier runs whose process is gone; their names."""
    removed: list[str] = []
    for line in _run("ip", "netns", "list", check=False).splitlines():
        name = line.split()[0] if line.strip() else ""
        match = _NAME.match(name)
        if match and not _pid_alive(int(match.group(1))) and int(match.group(1)) != os.getpid():
            _run("ip", "netns", "delete", name, check=False)
            removed.append(name)
    for line in _run("ip", "-o", "link", "show", check=False).splitlines():
        parts = line.split(":")
        if len(parts) < 2:
            continue
        link = parts[1].strip().split("@")[0]
        match = _NAME.match(link)
        if match and not _pid_alive(int(match.group(1))):
            _run("ip", "link", "delete", link, check=False)
            removed.append(link)
    return removed


def _used_networks() -> list[ipaddress.IPv4Network]:
    used: list[ipaddress.IPv4Network] = []
    for line in _run("ip", "-4", "-o", "addr", "show").splitlines():
        fields = line.split()
        if "inet" in fields:
            used.append(ipaddress.IPv4Interface(fields[fields.index("inet") + 1]).network)
    for line in _run("ip", "-4", "route", "show", "table", "all").splitlines():
        first = line.split()[0] if line.strip() else ""
        if first in ("default", "broadcast", "local", "unreachable", "blackhole", "prohibit"):
            first = line.split()[1] if len(line.split()) > 1 else ""
        with contextlib.suppress(ValueError):
            used.append(ipaddress.IPv4Network(first, strict=False))
    return used


def _free_subnet(seed: int) -> ipaddress.IPv4Network:
    used = _used_networks()
    candidates = 50 * 256
    for step in range(candidates):
        n = (seed * 7919 + step) % candidates
        net = ipaddress.IPv4Network(f"10.{200 + n // 256}.{n % 256}.0/24")
        if not any(net.overlaps(u) for u in used if u.prefixlen > 0):
            return net
    raise NetnsError("no free /24 in 10.200.0.0/13 for the harness's bridge")


@dataclass(frozen=True, slots=True)
class Host:
    """A node's namespace: its name, its address, and the prefix that runs a command in it."""

    name: str
    netns: str
    ip: str

    @property
    def wrapper(self) -> list[str]:
        return ["ip", "netns", "exec", self.netns]


class Network:
    """The bridge and the namespaces of one harness run (see the module docstring)."""

    def __init__(self) -> None:
        why = available()
        if why is not None:
            raise NetnsError(why)
        self._pid = os.getpid()
        self._tag = f"{PREFIX}{self._pid}"
        self.subnet = _free_subnet(self._pid)
        hosts = list(self.subnet.hosts())
        self.host_ip = str(hosts[0])
        self._next_ip = iter(hosts[1:MAX_NODES])
        self.bridge = f"{self._tag}br"
        self.hosts: dict[str, Host] = {}
        self._blocked: set[frozenset[str]] = set()
        self._closed = False
        _run("ip", "link", "add", self.bridge, "type", "bridge")
        try:
            _run("ip", "addr", "add", f"{self.host_ip}/{self.subnet.prefixlen}", "dev",
                 self.bridge)
            _run("ip", "link", "set", self.bridge, "up")
        except NetnsError:
            self.close()
            raise

    def add_host(self, name: str) -> Host:
        """A namespace of its own on the bridge, named after ``name``; its loopback is up."""
        if name in self.hosts:
            raise NetnsError(f"host {name!r} exists")
        index = len(self.hosts) + 1
        netns = f"{self._tag}-{name}"
        veth = f"{self._tag}v{index}"
        try:
            ip = str(next(self._next_ip))
        except StopIteration:
            raise NetnsError(f"more than {MAX_NODES} hosts") from None
        host = Host(name, netns, ip)
        _run("ip", "netns", "add", netns)
        self.hosts[name] = host
        _run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", netns)
        _run("ip", "link", "set", veth, "master", self.bridge, "up")
        _run("ip", "-n", netns, "addr", "add", f"{ip}/{self.subnet.prefixlen}", "dev", "eth0")
        _run("ip", "-n", netns, "link", "set", "eth0", "up")
        _run("ip", "-n", netns, "link", "set", "lo", "up")
        _run("ip", "netns", "exec", netns, "nft", "-f", "-", input_text=NFT_TABLE)
        return host

    # -- cuts ----------------------------------------------------------------------------

    def cut(self, a: str, b: str) -> None:
        """No packet between hosts ``a`` and ``b`` either way; both still reach the host."""
        if a == b:
            raise NetnsError(f"cannot cut {a} from itself")
        first, second = self.hosts[a], self.hosts[b]
        for here, there in ((first, second), (second, first)):
            _run("ip", "netns", "exec", here.netns, "nft", "add", "element", "inet", "chaos",
                 "blocked", f"{{ {there.ip} }}")
        self._blocked.add(frozenset((a, b)))

    def heal(self) -> None:
        """Every cut gone."""
        for host in self.hosts.values():
            _run("ip", "netns", "exec", host.netns, "nft", "flush", "set", "inet", "chaos",
                 "blocked")
        self._blocked.clear()

    def cuts(self) -> set[frozenset[str]]:
        return set(self._blocked)

    # -- teardown ------------------------------------------------------------------------

    def close(self) -> None:
        """Delete the namespaces and the bridge (idempotent; errors ignored)."""
        if self._closed:
            return
        self._closed = True
        for host in self.hosts.values():
            _run("ip", "netns", "delete", host.netns, check=False)
        _run("ip", "link", "delete", self.bridge, check=False)
        self.hosts.clear()

    def __enter__(self) -> Network:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
