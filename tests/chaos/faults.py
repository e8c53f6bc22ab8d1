"""The faults: what each does to the cluster, how long, and how it is healed.

A run's faults come from a *schedule* fixed by the seed before the cluster starts
(``make_schedule``): for each fault its kind, the quiet time before it, and three numbers in
[0, 1) that pick its target and its duration. Targets are named by role (the leader of the
n-th partition, a follower of it, the controller, the n-th ZooKeeper node) and resolved
against the cluster's state at that moment, so the same seed replays the same sequence of
faults; what the cluster does in between is its own.

Each fault runs to completion in ``run_fault``: inject, hold, heal (restart what was killed,
resume what was paused, remove the cuts, free the disk); the campaign then waits for the
cluster to be whole again before the next one. One fault at a time: Kafka's promise is about
any single failure.

Kinds (``KINDS``; ``needs`` says what the cluster must have for a kind to be scheduled):

- ``kill_leader`` / ``kill_follower`` / ``kill_controller``: SIGKILL, down 1-4 s, then started
  again (after ZooKeeper has dropped its registration);
- ``restart``: SIGTERM (controlled shutdown), wait for the exit, start again;
- ``pause_leader`` / ``pause_controller``: SIGSTOP for 1.3-2x ``zookeeper.session.timeout.ms``
  (2-6 s on a single node), then SIGCONT: the broker comes back after its session expired;
- ``partition_peers``: a partition leader cut from the other brokers (not from ZooKeeper or
  the clients) for 1.2-2x ``replica.lag.time.max.ms``;
- ``partition_zk``: a leader cut from ZooKeeper for 0.3-0.7x the session timeout (connection
  loss without expiry);
- ``isolate_leader``: a leader cut from the other brokers and ZooKeeper, clients still reach
  it, for 1.5-2.5x the session timeout (a new leader is elected behind its back);
- ``zk_expiry_broker`` / ``zk_expiry_controller``: a broker (a follower of some partition) /
  the controller cut from ZooKeeper for 1.5-2x the session timeout, then healed: its session
  has expired and it must re-register;
- ``zk_node_loss``: SIGKILL of one ZooKeeper node of three for 2-6 s, then restarted;
- ``disk_full``: a leader's log dir (its own tmpfs) filled to the last byte for 3-7 s, then
  freed; a broker that stopped meanwhile is started again.

Only when named (``--kinds``), so that the default kinds keep each seed's schedule:
``partition_zk_controller`` (the controller cut from ZooKeeper for 0.3-0.7x the session
timeout: its connection is lost, its session is not, and every one-shot watch it had is
gone with the connection) and, being two failures at once, ``lagging_takeover`` (a follower
drops out of the ISR, then the leader and the other follower die: what unclean election
trades data for; the harness's self-test).
"""

from __future__ import annotations

import contextlib
import errno
import os
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from tests.chaos.cluster import Cluster, PartitionState
from tests.chaos.history import FaultEvent, History

FILLER: Final = "chaos-filler"
FILL_CHUNK_BYTES: Final = 1 << 20
MAX_FILL_CHUNKS: Final = 1 << 16


@dataclass(frozen=True, slots=True)
class ScheduledFault:
    index: int
    kind: str
    quiet_s: float  # pause before injecting
    a: float  # picks the partition (or ZooKeeper node)
    b: float  # picks a role among candidates
    c: float  # picks the duration within the kind's range

    def describe(self) -> str:
        return (f"#{self.index} {self.kind} after {self.quiet_s:.1f} s "
                f"(a={self.a:.3f} b={self.b:.3f} c={self.c:.3f})")


@dataclass(frozen=True, slots=True)
class Needs:
    brokers: int = 1
    zookeeper: int = 0
    network: bool = False
    default: bool = True  # scheduled unless kinds are named (False: only when named)


class FaultContext:
    """What a fault acts on: the cluster, its history, and the topic whose leaders it hits."""

    def __init__(self, cluster: Cluster, history: History, topic: str) -> None:
        self.cluster = cluster
        self.history = history
        self.topic = topic

    @property
    def session_s(self) -> float:
        return self.cluster.spec.session_timeout_ms / 1000

    @property
    def lag_s(self) -> float:
        return self.cluster.spec.replica_lag_time_max_ms / 1000

    def partition(self, u: float) -> tuple[int, PartitionState | None]:
        states = self.cluster.partition_states(self.topic)
        if not states:
            return 0, None
        numbers = sorted(states)
        number = numbers[int(u * len(numbers)) % len(numbers)]
        return number, states[number]

    def leader(self, u: float) -> tuple[int, str]:
        number, state = self.partition(u)
        if state is None or state.leader < 0:
            broker = sorted(self.cluster.brokers)[int(u * len(self.cluster.brokers))
                                                   % len(self.cluster.brokers)]
            return broker, f"broker {broker} (no leader known for {self.topic}-{number})"
        return state.leader, f"broker {state.leader} (leader of {self.topic}-{number})"

    def follower(self, u: float, v: float) -> tuple[int, str]:
        number, state = self.partition(u)
        if state is None:
            return self.leader(u)
        followers = [r for r in state.replicas if r != state.leader]
        if not followers:
            return self.leader(u)
        broker = followers[int(v * len(followers)) % len(followers)]
        return broker, f"broker {broker} (follower of {self.topic}-{number})"

    def controller(self, u: float) -> tuple[int, str]:
        controller = self.cluster.controller_id()
        if controller is None:
            broker, what = self.leader(u)
            return broker, f"{what}; no controller known"
        return controller, f"broker {controller} (controller)"


def _between(low: float, high: float, u: float) -> float:
    return low + (high - low) * u


def _hold(seconds: float) -> None:
    time.sleep(max(0.0, seconds))


# -- the kinds ---------------------------------------------------------------------------


def _kill(ctx: FaultContext, f: ScheduledFault, target: tuple[int, str]) -> FaultEvent:
    """SIGKILL the ``target`` broker (id, description) for 1-4 s, then start it again."""
    broker, what = target
    event = ctx.history.fault(f.kind, what)
    down_s = _between(1, 4, f.c)
    node = ctx.cluster.brokers[broker]
    node.kill()
    event.details.append(f"SIGKILL broker {broker}; down {down_s:.1f} s")
    _hold(down_s)
    event.t_healed = ctx.history.now()
    ctx.cluster.start_broker(broker)
    event.details.append(f"broker {broker} started again at {ctx.history.now():.1f} s")
    return event


def kill_leader(ctx: FaultContext, f: ScheduledFault) -> FaultEvent:
    return _kill(ctx, f, ctx.leader(f.a))


def kill_follower(ctx: FaultContext, f: ScheduledFault) -> FaultEvent:
    return _kill(ctx, f, ctx.follower(f.a, f.b))


def kill_controller(ctx: FaultContext, f: ScheduledFault) -> FaultEvent:
    return _kill(ctx, f, ctx.controller(f.a))


def restart(ctx: FaultContext, f: ScheduledFault) -> FaultEvent:
    brokers = sorted(ctx.cluster.brokers)
    broker = brokers[int(f.a * len(brokers)) % len(brokers)]
    event = ctx.history.fault(f.kind, f"broker {broker}")
    node = ctx.cluster.brokers[broker]
    t0 = time.monotonic()
    code = node.stop()
    event.details.append(f"SIGTERM broker {broker}: exit code {code} after "
                         f"{time.monotonic() - t0:.1f} s")
    event.t_healed = ctx.history.now()
    ctx.cluster.start_broker(broker)
    return event


def _pause(ctx: FaultContext, f: ScheduledFault, target: tuple[int, str]) -> FaultEvent:
    """SIGSTOP the ``target`` broker (id, description) past its ZooKeeper session (2-6 s
    without ZooKeeper), then SIGCONT."""
    broker, what = target
    event = ctx.history.fault(f.kind, what)
    if ctx.cluster.kazoo is not None:
        hold = _between(1.3, 2.0, f.c) * ctx.session_s
    else:
        hold = _between(2, 6, f.c)
    node = ctx.cluster.brokers[broker]
    node.pause()
    event.details.append(f"SIGSTOP broker {broker} for {hold:.1f} s")
    _hold(hold)
    node.resume()
    event.t_healed = ctx.history.now()
    event.details.append(f"SIGCONT broker {broker}")
    return event


def pause_leader(ctx: FaultContext, f: ScheduledFault) -> FaultEvent:
    return _pause(ctx, f, ctx.leader(f.a))


def pause_controller(ctx: FaultContext, f: ScheduledFault) -> FaultEvent:
    return _pause(ctx, f, ctx.controller(f.a))


def _cut(ctx: FaultContext, f: ScheduledFault, target: tuple[int, str], *, peers: bool,
         zookeeper: bool, hold_s: float) -> FaultEvent:
    """Cut the ``target`` broker (id, description) from its peers and/or ZooKeeper for
    ``hold_s``, then heal the network."""
    broker, what = target
    event = ctx.history.fault(f.kind, what)
    network = ctx.cluster.network
    assert network is not None
    me = ctx.cluster.broker_hosts[broker].name
    others = []
    if peers:
        others += [h.name for b, h in ctx.cluster.broker_hosts.items() if b != broker]
    if zookeeper:
        others += [h.name for h in ctx.cluster.zk_hosts.values()]
    for other in others:
        network.cut(me, other)
    event.details.append(f"cut {me} from {', '.join(others)} for {hold_s:.1f} s")
    _hold(hold_s)
    network.heal()
    event.t_healed = ctx.history.now()
    event.details.append("healed")
    return event


def partition_peers(ctx: FaultContext, f: ScheduledFault) -> FaultEvent:
    return _cut(ctx, f, ctx.leader(f.a), peers=True, zookeeper=False,
                hold_s=_between(1.2, 2.0, f.c) * ctx.lag_s)


def partition_zk(ctx: FaultContext, f: ScheduledFault) -> FaultEvent:
    return _cut(ctx, f, ctx.leader(f.a), peers=False, zookeeper=True,
                hold_s=_between(0.3, 0.7, f.c) * ctx.session_s)


def partition_zk_controller(ctx: FaultContext, f: ScheduledFault) -> FaultEvent:
    return _cut(ctx, f, ctx.controller(f.a), peers=False, zookeeper=True,
                hold_s=_between(0.3, 0.7, f.c) * ctx.session_s)


def isolate_leader(ctx: FaultContext, f: ScheduledFault) -> FaultEvent:
    return _cut(ctx, f, ctx.leader(f.a), peers=True, zookeeper=True,
                hold_s=_between(1.5, 2.5, f.c) * ctx.session_s)


def zk_expiry_broker(ctx: FaultContext, f: ScheduledFault) -> FaultEvent:
    return _cut(ctx, f, ctx.follower(f.a, f.b), peers=False, zookeeper=True,
                hold_s=_between(1.5, 2.0, f.c) * ctx.session_s)


def zk_expiry_controller(ctx: FaultContext, f: ScheduledFault) -> FaultEvent:
    return _cut(ctx, f, ctx.controller(f.a), peers=False, zookeeper=True,
                hold_s=_between(1.5, 2.0, f.c) * ctx.session_s)


def zk_node_loss(ctx: FaultContext, f: ScheduledFault) -> FaultEvent:
    zk = ctx.cluster.zk
    assert zk is not None
    node = zk.nodes[int(f.a * len(zk.nodes)) % len(zk.nodes)]
    event = ctx.history.fault(f.kind, f"zookeeper node {node.myid} ({node.mode() or '?'})")
    down_s = _between(2, 6, f.c)
    node.kill()
    event.details.append(f"SIGKILL zookeeper node {node.myid}; down {down_s:.1f} s")
    _hold(down_s)
    node.start()
    zk.wait_serving([node], timeout_s=60)
    event.t_healed = ctx.history.now()
    return event


def fill(directory: Path) -> int:
    """Fill the file system of ``directory`` with one file; the bytes written."""
    path = directory / FILLER
    written = 0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        free = os.statvfs(directory).f_bavail * os.statvfs(directory).f_frsize
        if free > 0:
            with contextlib.suppress(OSError):
                os.posix_fallocate(fd, 0, free)
                written = free
        chunk = b"\0" * FILL_CHUNK_BYTES
        os.lseek(fd, 0, os.SEEK_END)
        for _ in range(MAX_FILL_CHUNKS):  # what fallocate left (a tmpfs rounds to pages)
            size = len(chunk)
            try:
                written += os.write(fd, chunk[:size])
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                if size == 1:
                    break
                chunk = chunk[: max(1, size // 16)]
    finally:
        os.close(fd)
    return written


def disk_full(ctx: FaultContext, f: ScheduledFault) -> FaultEvent:
    broker, what = ctx.leader(f.a)
    event = ctx.history.fault(f.kind, what)
    node = ctx.cluster.brokers[broker]
    hold = _between(3, 7, f.c)
    written = fill(node.data_dir)
    event.details.append(f"filled broker {broker}'s log dir with {written} bytes for "
                         f"{hold:.1f} s")
    _hold(hold)
    (node.data_dir / FILLER).unlink(missing_ok=True)
    event.t_healed = ctx.history.now()
    if not node.running():
        event.details.append(f"broker {broker} had stopped (exit code {node.exit_code()}); "
                             "started again")
        ctx.cluster.start_broker(broker)
    return event


def _wait_for(predicate: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):  # ZooKeeper reconnecting: ask again
            if predicate():
                return True
        time.sleep(0.2)
    return False


def lagging_takeover(ctx: FaultContext, f: ScheduledFault) -> FaultEvent:
    """Two failures in a row, the case unclean leader election exists for: a follower cut
    from the other brokers drops out of the ISR while the leader and the other follower
    go on acknowledging; then the leader and that follower are killed. The partition has no
    in-sync replica left: without unclean election it waits for them (unavailable, nothing
    lost); with it, the lagging follower becomes leader and the records it never had are
    gone, the returning brokers truncated to its log (Kafka's documented trade)."""
    number, state = ctx.partition(f.a)
    if state is None or len(state.replicas) < 3:
        raise RuntimeError(f"{ctx.topic}-{number}: needs three replicas")
    leader = state.leader
    followers = [r for r in state.replicas if r != leader]
    # Not the controller: cut from the leader, it would also stop the ISR shrink the
    # leader asks of it (AlterPartition), and the follower would never fall out of the ISR.
    controller = ctx.cluster.controller_id()
    candidates = [r for r in followers if r != controller] or followers
    lagger = candidates[int(f.b * len(candidates)) % len(candidates)]
    other = next(r for r in followers if r != lagger)
    event = ctx.history.fault(f.kind, f"{ctx.topic}-{number}: broker {lagger} lags, then "
                                      f"leader {leader} and follower {other} are killed")
    network = ctx.cluster.network
    assert network is not None
    hosts = ctx.cluster.broker_hosts
    for peer in (leader, other):
        network.cut(hosts[lagger].name, hosts[peer].name)

    def out_of_isr() -> bool:
        now = ctx.cluster.partition_states(ctx.topic).get(number)
        return now is not None and lagger not in now.isr

    shrunk = _wait_for(out_of_isr, 3 * ctx.lag_s + 10)
    event.details.append(f"cut broker {lagger} from {leader} and {other}; "
                         f"{'out of the ISR' if shrunk else 'still in the ISR'} at "
                         f"{ctx.history.now():.1f} s")
    _hold(_between(1, 3, f.c))
    for victim in (leader, other):
        ctx.cluster.brokers[victim].kill()
    network.heal()
    event.details.append(f"SIGKILL brokers {leader} and {other}; cut healed at "
                         f"{ctx.history.now():.1f} s")

    def new_leader() -> bool:
        now = ctx.cluster.partition_states(ctx.topic).get(number)
        return now is not None and now.leader == lagger

    elected = _wait_for(new_leader, 2 * ctx.session_s + 10)
    now = ctx.cluster.partition_states(ctx.topic).get(number)
    event.details.append(f"leader now {now.leader if now else '?'}"
                         + (" (the lagging follower: unclean election)" if elected else ""))
    _hold(2.0)
    event.t_healed = ctx.history.now()
    for victim in (leader, other):
        ctx.cluster.start_broker(victim)
    return event


FaultFn = Callable[[FaultContext, ScheduledFault], FaultEvent]

KINDS: Final[dict[str, tuple[FaultFn, Needs]]] = {
    "kill_leader": (kill_leader, Needs()),
    "kill_follower": (kill_follower, Needs(brokers=2)),
    "kill_controller": (kill_controller, Needs(brokers=2, zookeeper=1)),
    "restart": (restart, Needs()),
    "pause_leader": (pause_leader, Needs()),
    "pause_controller": (pause_controller, Needs(brokers=2, zookeeper=1)),
    "partition_peers": (partition_peers, Needs(brokers=2, network=True)),
    "partition_zk": (partition_zk, Needs(zookeeper=1, network=True)),
    "isolate_leader": (isolate_leader, Needs(brokers=2, zookeeper=1, network=True)),
    "zk_expiry_broker": (zk_expiry_broker, Needs(zookeeper=1, network=True)),
    "zk_expiry_controller": (zk_expiry_controller, Needs(brokers=2, zookeeper=1,
                                                         network=True)),
    "zk_node_loss": (zk_node_loss, Needs(zookeeper=3)),
    "disk_full": (disk_full, Needs()),
    "partition_zk_controller": (partition_zk_controller, Needs(brokers=2, zookeeper=1,
                                                               network=True, default=False)),
    "lagging_takeover": (lagging_takeover, Needs(brokers=3, zookeeper=1, network=True,
                                                 default=False)),
}


def applicable(brokers: int, zookeeper_nodes: int, network: bool, *,
               named: bool = False) -> list[str]:
    """The kinds this cluster can take (``named``: also those scheduled only on request)."""
    return [name for name, (_, needs) in KINDS.items()
            if brokers >= needs.brokers and zookeeper_nodes >= needs.zookeeper
            and (network or not needs.network) and (named or needs.default)]


def make_schedule(seed: int, kinds: Sequence[str], count: int, *,
                  quiet_s: tuple[float, float] = (1.0, 3.0)) -> list[ScheduledFault]:
    """``count`` faults: every kind in turn (each round shuffled), so each kind gets its
    share; quiet times and target picks drawn from the seed."""
    if not kinds:
        raise ValueError("no fault kind to schedule")
    rng = random.Random(seed)
    order: list[str] = []
    while len(order) < count:
        round_ = list(kinds)
        rng.shuffle(round_)
        order += round_
    return [ScheduledFault(i, kind, round(rng.uniform(*quiet_s), 3), rng.random(),
                           rng.random(), rng.random())
            for i, kind in enumerate(order[:count])]


def run_fault(ctx: FaultContext, fault: ScheduledFault) -> FaultEvent:
    fn, _ = KINDS[fault.kind]
    return fn(ctx, fault)
