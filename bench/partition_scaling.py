"""P7 partition scaling: one broker holding 1, 100, 1,000 and 10,000 partitions.

For each partition count N and each broker kind, a fresh broker (same kind and settings as
the run's, empty log dir, nothing else on it) goes through:

1. start; create N partitions (topics ``p7-0``, ``p7-1``, ... of at most
   ``TOPIC_PARTITIONS_MAX`` partitions each, replication factor 1): seconds to create;
2. produce ``p7_warmup_records`` unmeasured (a fresh JVM has not compiled its hot paths
   yet), then ``p7_records`` 100-byte records spread round-robin over all N partitions
   (librdkafka, acks=1, linger.ms 5, as P1): records/s, MiB/s, broker CPU-seconds per GB
   (10^9 bytes) produced;
3. broker RSS (VmRSS of its process tree) and open file descriptors after the produce;
   RSS per partition above the 1-partition broker of the same run;
4. sequential Metadata v12 requests for all topics on one connection
   (``bench.metadata_probe``, answer read but not decoded), at least ``p7_metadata_requests``
   and one second's worth: p50 and p99 ms, broker CPU microseconds per request, answer size;
5. clean stop (SIGTERM; seconds), relaunch on the same log dir and poll Metadata: seconds
   from the launch to the first answer and to the first answer with all N partitions led
   (the broker can serve them all), and the broker's CPU-seconds up to that point;
6. stop and delete the log dir.

Kafka runs with its 1 GiB heap (-Xms1g): its RSS counts the heap pages it has touched.
The per-topic cap keeps every CreateTopics within what a KRaft controller accepts in one
operation. The open-file limit of the bench (inherited by the brokers) is raised to
``FD_LIMIT`` where allowed, as Kafka's operations guide asks for brokers with many
partitions.
"""

from __future__ import annotations

import os
import resource
import time
from typing import Any, Final

from bench.admin import create_topic
from bench.brokers import BrokerUnderTest
from bench.context import RunContext
from bench.figures import Figure, cpu_pct
from bench.metadata_probe import MetadataClient, led_partitions, wait_served
from bench.procs import BenchError, tree_cpu_s, tree_rss_bytes
from bench.scenarios import MIB, Scenario
from bench.stats import percentiles

TOPIC_PREFIX: Final[str] = "p7-"
TOPIC_PARTITIONS_MAX: Final[int] = 1_000
FD_LIMIT: Final[int] = 200_000
CREATE_TIMEOUT_S: Final[float] = 600.0
START_TIMEOUT_S: Final[float] = 600.0
METADATA_WARMUP: Final[int] = 5
METADATA_MIN_S: Final[float] = 1.0
METADATA_MAX_REQUESTS: Final[int] = 100_000
# Row groups, in the order the report lists them (each group down the partition counts).
GROUPS: Final[tuple[str, ...]] = ("create", "produce", "rss", "rss-per", "metadata", "start")


def topic_layout(partitions: int) -> tuple[int, int]:
    """(topics, partitions per topic) for N partitions: N <= 1,000 or a multiple of it."""
    if partitions <= TOPIC_PARTITIONS_MAX:
        return 1, partitions
    if partitions % TOPIC_PARTITIONS_MAX:
        raise ValueError(f"{partitions} partitions: not a multiple of {TOPIC_PARTITIONS_MAX}")
    return partitions // TOPIC_PARTITIONS_MAX, TOPIC_PARTITIONS_MAX


def raise_fd_limit(wanted: int = FD_LIMIT) -> int:
    """Raise RLIMIT_NOFILE (soft and, as root, hard) to wanted if lower; the soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= wanted:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, max(hard, wanted)))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def open_fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


class PartitionScaling(Scenario):
    key = "P7"
    title = "partition scaling (a fresh broker per partition count)"
    uses_shared_broker = False

    def run(self, broker: BrokerUnderTest, ctx: RunContext, run: int) -> list[Figure]:
        raise_fd_limit()
        ordered: list[tuple[int, int, Figure]] = []
        rss_one: float | None = None
        for n in ctx.sizes.p7_partitions:
            fresh = broker.fresh(ctx.work_dir / f"p7-{broker.name}-{n}p-r{run}")
            try:
                figures = _cycle(fresh, n, ctx, run)
            except BenchError as exc:  # recorded; the other partition counts still run
                ctx.soft_failures.append(f"{n:,} partitions: {exc}{_log_errors(fresh)}")
                continue
            finally:
                fresh.stop()
                fresh.wipe()
            rss = next(f.value for _, f in figures if f.metric == "RSS MiB")
            if n == 1:
                rss_one = rss
            elif rss_one is not None:
                figures.append(("rss-per", _fig(
                    f"P7 RSS per partition above 1 partition, {n:,} partitions", "KiB",
                    broker, run, (rss - rss_one) * 1024 / (n - 1), higher=False)))
            ordered += [(GROUPS.index(group), n, f) for group, f in figures]
        ordered.sort(key=lambda item: (item[0], item[1]))
        return [f for _, _, f in ordered]


def _log_errors(broker: BrokerUnderTest) -> str:
    """The broker's last OS error and last ERROR line (minikafka's broker.log, Kafka's
    server.log), on one line: reports show a failure's first line."""
    errno_line = error_line = ""
    for name in ("broker.log", "server.log"):
        try:
            with (broker.log_dir.parent / name).open(errors="replace") as f:
                for line in f:
                    if "Errno" in line:
                        errno_line = line.strip()[:200]
                    elif " ERROR " in line:
                        error_line = line.strip()[:200]
        except OSError:
            continue
    return "".join(f" | {line}" for line in (errno_line, error_line) if line)


def _fig(row: str, metric: str, broker: BrokerUnderTest, run: int, value: float, *,
         higher: bool, **cpu: Any) -> Figure:
    return Figure(scenario="P7", row=row, metric=metric, broker=broker.name, run=run,
                  value=value, higher_is_better=higher, **cpu)


def _cycle(
    broker: BrokerUnderTest, n: int, ctx: RunContext, run: int
) -> list[tuple[str, Figure]]:
    """One fresh broker with n partitions: every P7 figure of it, tagged with its group."""
    out: list[tuple[str, Figure]] = []
    broker.start()
    topics, per_topic = topic_layout(n)
    names = [f"{TOPIC_PREFIX}{i}" for i in range(topics)]
    cpu0, t0 = tree_cpu_s(broker.pid), time.monotonic()
    for name in names:
        create_topic(broker.bootstrap, name, per_topic, timeout_s=CREATE_TIMEOUT_S,
                     alive=lambda: broker.pid != 0)
    create_s, create_cpu_s = time.monotonic() - t0, tree_cpu_s(broker.pid) - cpu0
    row = f"P7 create {n:,} partitions"
    out.append(("create", _fig(row, "s", broker, run, create_s, higher=False,
                               broker_cpu_pct=cpu_pct(create_cpu_s, create_s))))

    spec = {
        "workload": "produce",
        "topics": names,
        "partitions": per_topic,
        "records": ctx.sizes.p7_records,
        "record_bytes": ctx.sizes.record_bytes,
        "linger_ms": 5,
        "batch_bytes": MIB,
        "timeout_s": 600,
    }
    if ctx.sizes.p7_warmup_records > 0:  # unmeasured: the JVM's JIT, both brokers' caches
        warmup = {**spec, "records": ctx.sizes.p7_warmup_records}
        ctx.run_load(broker, warmup, name=f"P7 warm-up {n}p")
    load = ctx.run_load(broker, spec, name=f"P7 produce {n}p")
    res = load.result
    elapsed_s = float(res["elapsed_s"])
    cpu = {"broker_cpu_pct": cpu_pct(load.broker_cpu_s, load.wall_s),
           "client_cpu_pct": cpu_pct(float(res["cpu_s"]), elapsed_s)}
    row = f"P7 produce over {n:,} partitions (librdkafka)"
    out += [
        ("produce", _fig(row, "records/s", broker, run, res["records"] / elapsed_s,
                         higher=True, **cpu)),
        ("produce", _fig(row, "MiB/s", broker, run, res["bytes"] / MIB / elapsed_s,
                         higher=True, **cpu)),
        ("produce", _fig(row, "broker CPU-s/GB", broker, run,
                         load.broker_cpu_s / (res["bytes"] / 1e9), higher=False)),
    ]

    row = f"P7 broker after the produce, {n:,} partitions"
    out += [
        ("rss", _fig(row, "RSS MiB", broker, run, tree_rss_bytes(broker.pid) / MIB,
                     higher=False)),
        ("rss", _fig(row, "open fds", broker, run, open_fds(broker.pid), higher=False)),
    ]

    out += _metadata(broker, n, ctx.sizes.p7_metadata_requests, run)

    stop_s = broker.stop()
    launched = time.monotonic()
    broker.launch()
    served = wait_served(broker.bootstrap, TOPIC_PREFIX, n, timeout_s=START_TIMEOUT_S)
    start_cpu_s = tree_cpu_s(broker.pid)
    row = f"P7 start-up after a clean stop, {n:,} partitions"
    out += [
        ("start", _fig(row, "s to first Metadata answer", broker, run,
                       served.first_answer - launched, higher=False)),
        ("start", _fig(row, "s to all partitions led", broker, run,
                       served.all_led - launched, higher=False)),
        ("start", _fig(row, "broker CPU-s to all led", broker, run, start_cpu_s,
                       higher=False)),
        ("start", _fig(row, "clean stop s", broker, run, stop_s, higher=False)),
    ]
    return out


def _metadata(broker: BrokerUnderTest, n: int, requests: int, run: int) -> list[tuple[str, Figure]]:
    """At least ``requests`` requests and METADATA_MIN_S seconds (CPU is read in clock
    ticks), at most METADATA_MAX_REQUESTS."""
    with MetadataClient.to(broker.bootstrap) as client:
        _, frame = client.timed_call()
        led = led_partitions(frame, TOPIC_PREFIX)
        if led != n:
            raise BenchError(f"Metadata shows {led} of {n} partitions led on {broker.name}")
        for _ in range(METADATA_WARMUP):
            client.timed_call()
        cpu0, t0 = tree_cpu_s(broker.pid), time.monotonic()
        latencies_s: list[float] = []
        while len(latencies_s) < METADATA_MAX_REQUESTS and (
            len(latencies_s) < requests or time.monotonic() - t0 < METADATA_MIN_S
        ):
            latencies_s.append(client.timed_call()[0])
        wall_s, cpu_s = time.monotonic() - t0, tree_cpu_s(broker.pid) - cpu0
    p50, p99 = percentiles(latencies_s, (50.0, 99.0))
    row = f"P7 Metadata (all topics), {n:,} partitions"
    cpu = {"broker_cpu_pct": cpu_pct(cpu_s, wall_s)}
    return [
        ("metadata", _fig(row, "p50 ms", broker, run, p50 * 1000, higher=False, **cpu)),
        ("metadata", _fig(row, "p99 ms", broker, run, p99 * 1000, higher=False, **cpu)),
        ("metadata", _fig(row, "broker CPU us/request", broker, run,
                          cpu_s / len(latencies_s) * 1e6, higher=False)),
        ("metadata", _fig(row, "answer KiB", broker, run, len(frame) / 1024, higher=False)),
    ]


def check_partition_counts(counts: tuple[int, ...]) -> None:
    """Raise ValueError for counts P7 cannot lay out."""
    if not counts:
        raise ValueError("no partition counts")
    for n in counts:
        if not 1 <= n <= 100_000:
            raise ValueError(f"{n} partitions: outside 1-100,000")
        topic_layout(n)
