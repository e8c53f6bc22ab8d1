"""The benchmark's scenarios, each a prepare step (untimed) and a run step (measured).

- P1 produce throughput, 1 and 8 partitions, 100-byte records, linger.ms 5, batch.size
  1 MiB, acks=1: records/s and MiB/s (librdkafka; ProducerPerformance as second opinion).
- P2 consume throughput of data written the P1 way, by a cold consumer (new process,
  assign() from offset 0, no group): records/s and MiB/s (librdkafka; ConsumerPerformance,
  which needs the group APIs, as second opinion); plus the loopback sendfile ceiling of the
  same segment bytes (``bench.loopback``: sender and receiver processes, 1 MiB and 64 MiB
  per sendfile call, each with the receiver woken for any data or only once 128 KiB or
  512 KiB are there (SO_RCVLOWAT), 5 iterations each: each pair's median, the ceiling the
  best of them; CPU columns: sender / receiver).
- P2L the same with 64 KiB records (1 partition), read by four consumers in turn:
  librdkafka, a bare Fetch loop that discards the records (``bench.fetch_drain``: the
  broker's pace, not a client's), kcat (librdkafka's C client, ``bench.kcat_consume``) and,
  with the Java tools, ConsumerPerformance: MiB/s,
  broker CPU-seconds per GB (10^9 bytes) consumed, the loopback sendfile ceiling of the same
  segment bytes measured after each run (as in P2), and each MiB/s as a percentage of that
  ceiling.
- P4 end-to-end latency at fixed rates, 10,000 and 50,000 records/s by default (``--p4-rates``;
  ``--quick``: 10,000), one row per rate (producer linger.ms 0, acks=1; consumer with
  librdkafka's defaults, fetch.wait.max.ms 500): p50, p99, p99.9 in ms, and the rate the
  producer achieved (records over the time to its last send) with how far behind its
  schedule it fell at worst, and the broker's CPU microseconds per record; each broker first
  serves this load unmeasured (the rates in turn) until its CPU per record stops falling
  (30-90 s), so that no measured run meets a JVM still compiling P4's paths.
- P5 small requests: 16 producers, linger 0, one record per request, one request in
  flight each: requests/s, p99 ms and the broker's CPU microseconds per request; each
  broker first serves this load unmeasured until its CPU per request stops falling (20-60 s:
  a fresh JVM compiles its produce path meanwhile), so every measured run is a warm one.
- P6 restart: fill 20 partitions with ``size`` bytes of 1 KiB records, then (per run)
  stop the broker cleanly and measure launch-to-first-acknowledged-produce in seconds.
- ZC zero-copy: minikafka's fetch with os.sendfile against the same broker started with
  ``MINIKAFKA_FETCH_COPY=1`` (the copying path), P2's consume on both.

Every throughput row (P1, P2, P2L, ZC) also gives the broker's CPU-seconds per GB (10^9
bytes) produced or consumed, over the load's lifetime: the efficiency figure, which says
more than the rate where the client, not the broker, bounds it.

MiB is 2**20 bytes (Kafka's perf tools call it MB).
"""

from __future__ import annotations

import itertools
import time
from abc import ABC, abstractmethod
from typing import Any, Final

from bench import java_perf
from bench.admin import create_topic
from bench.brokers import BrokerUnderTest
from bench.context import PROFILED, RunContext
from bench.figures import Figure, cpu_pct
from bench.load_procs import LoadOutcome, start_latency_pair
from bench.load_specs import latency_specs
from bench.loopback import LoopbackResult, measure_sendfile
from bench.procs import BenchError, tree_cpu_s
from bench.warming import RunFigures, describe, warm_until_steady

MIB: Final[int] = 1 << 20


def _produce_spec(topic: str, records: int, record_bytes: int) -> dict[str, Any]:
    """A librdkafka produce load of ``records`` records of ``record_bytes`` each, batched as
    every produce scenario batches them (5 ms linger, 1 MiB batches)."""
    return {"workload": "produce", "topic": topic, "records": records,
            "record_bytes": record_bytes, "linger_ms": 5, "batch_bytes": MIB}


def _call_size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= MIB else f"{n >> 10} KiB"


def _loopback_figures(scenario: str, result: LoopbackResult, run: int) -> list[Figure]:
    """The loopback rows of one run: each call size and receive low-water mark's median
    MiB/s (CPU columns: sender / receiver process), and the ceiling, the best of them."""
    figures = [
        Figure(
            scenario=scenario,
            row=f"{scenario} loopback sendfile, {_call_size(r.call_bytes)} per call, "
            + (f"SO_RCVLOWAT {_call_size(r.low_water_bytes)}" if r.low_water_bytes
               else "no SO_RCVLOWAT")
            + " (sender and receiver processes)",
            metric="MiB/s",
            broker="loopback",
            run=run,
            value=r.mib_per_s,
            higher_is_better=True,
            broker_cpu_pct=r.sender_cpu_pct,
            client_cpu_pct=r.receiver_cpu_pct,
        )
        for r in result.by_call_size
    ]
    figures.append(Figure(
        scenario=scenario,
        row=f"{scenario} loopback sendfile ceiling ({result.size_bytes / MIB:.0f} MiB, "
        "best of those)",
        metric="MiB/s",
        broker="loopback",
        run=run,
        value=result.mib_per_s,
        higher_is_better=True,
        broker_cpu_pct=result.ceiling.sender_cpu_pct,
        client_cpu_pct=result.ceiling.receiver_cpu_pct,
    ))
    return figures


def _rate_figures(
    scenario: str, row: str, broker: str, run: int, *, records_per_s: float, mib_per_s: float,
    broker_cpu_pct: float | None, client_cpu_pct: float | None,
    broker_cpu_s: float | None, gb: float,
) -> list[Figure]:
    """The records/s and MiB/s figures of one throughput run (higher is better), and the
    broker's CPU-seconds per GB (10^9 bytes) moved, produced or consumed (lower is better:
    the efficiency figure, comparable whichever side, client or broker, bounds the rate)."""
    common: dict[str, Any] = {
        "scenario": scenario,
        "row": row,
        "broker": broker,
        "run": run,
        "broker_cpu_pct": broker_cpu_pct,
        "client_cpu_pct": client_cpu_pct,
    }
    figures = [
        Figure(metric="records/s", value=records_per_s, higher_is_better=True, **common),
        Figure(metric="MiB/s", value=mib_per_s, higher_is_better=True, **common),
    ]
    if broker_cpu_s is not None and gb > 0:
        figures.append(Figure(metric="broker CPU-s/GB", value=broker_cpu_s / gb,
                              higher_is_better=False, **common))
    return figures


def _throughput_figures(
    scenario: str, row: str, broker: str, run: int, out: LoadOutcome
) -> list[Figure]:
    res = out.result
    elapsed_s = float(res["elapsed_s"])
    return _rate_figures(
        scenario, row, broker, run,
        records_per_s=res["records"] / elapsed_s,
        mib_per_s=res["bytes"] / MIB / elapsed_s,
        broker_cpu_pct=cpu_pct(out.broker_cpu_s, out.wall_s),
        client_cpu_pct=cpu_pct(float(res["cpu_s"]), elapsed_s),
        broker_cpu_s=out.broker_cpu_s,
        gb=float(res["bytes"]) / 1e9,
    )


def _java_figures(
    scenario: str,
    row: str,
    broker: str,
    run: int,
    res: java_perf.JavaPerfResult,
    broker_cpu_s: float,
    gb: float,
) -> list[Figure]:
    """The tool's own rates; ``gb``: the bytes it moved (records x record size) / 10^9."""
    return _rate_figures(
        scenario, row, broker, run,
        records_per_s=res.records_per_s,
        mib_per_s=res.mib_per_s,
        broker_cpu_pct=cpu_pct(broker_cpu_s, res.elapsed_s),
        client_cpu_pct=cpu_pct(res.cpu_s, res.elapsed_s),
        broker_cpu_s=broker_cpu_s,
        gb=gb,
    )


class Scenario(ABC):
    key: str
    title: str
    profile: bool = False  # py-spy the minikafka broker during its first run
    uses_shared_broker: bool = True  # False: the scenario starts brokers of its own

    def profile_labels(self, broker_name: str, ctx: RunContext) -> list[str]:
        """The flame graphs (``<results dir>/<label>.svg``) ``--profile`` takes of this
        scenario on ``broker_name``: one of its whole first run where ``profile`` is set."""
        return [f"{self.key}-{broker_name}"] if self.profile and broker_name in PROFILED else []

    def prepare(self, broker: BrokerUnderTest, ctx: RunContext) -> list[Figure]:
        """Untimed set-up on one broker (topics, data); may return one-off figures."""
        return []

    @abstractmethod
    def run(self, broker: BrokerUnderTest, ctx: RunContext, run: int) -> list[Figure]:
        """One measured run against broker."""

    def after_run(self, brokers: list[BrokerUnderTest], ctx: RunContext, run: int) -> list[Figure]:
        """Broker-independent figures taken once per run, after every broker's turn."""
        return []


class P1Produce(Scenario):
    key = "P1"
    title = "produce throughput"
    profile = True
    PARTITIONS: Final[tuple[int, ...]] = (1, 8)

    def run(self, broker: BrokerUnderTest, ctx: RunContext, run: int) -> list[Figure]:
        figures: list[Figure] = []
        sizes = ctx.sizes
        for partitions in self.PARTITIONS:
            topic = f"p1-{partitions}p-r{run}"
            create_topic(broker.bootstrap, topic, partitions)
            spec = _produce_spec(topic, sizes.p1_records, sizes.record_bytes)
            out = ctx.run_load(broker, spec, name=f"P1 {partitions}p")
            row = f"P1 produce {partitions}p (librdkafka)"
            figures += _throughput_figures(self.key, row, broker.name, run, out)
            if sizes.java:
                jtopic = f"p1j-{partitions}p-r{run}"
                create_topic(broker.bootstrap, jtopic, partitions)
                cpu0 = tree_cpu_s(broker.pid)
                res = java_perf.producer_perf(
                    broker.bootstrap,
                    jtopic,
                    records=sizes.p1_records,
                    record_bytes=sizes.record_bytes,
                    work_dir=ctx.work_dir,
                )
                cpu_s = tree_cpu_s(broker.pid) - cpu0
                row = f"P1 produce {partitions}p (Java perf-test)"
                gb = sizes.p1_records * sizes.record_bytes / 1e9
                figures += _java_figures(self.key, row, broker.name, run, res, cpu_s, gb)
        return figures


class P2Consume(Scenario):
    key = "P2"
    title = "consume throughput"
    profile = True
    PARTITIONS: Final[tuple[int, ...]] = (1, 8)

    def prepare(self, broker: BrokerUnderTest, ctx: RunContext) -> list[Figure]:
        for partitions in self.PARTITIONS:
            topic = f"p2-{partitions}p"
            create_topic(broker.bootstrap, topic, partitions)
            spec = _produce_spec(topic, ctx.sizes.p2_records, ctx.sizes.record_bytes)
            ctx.run_load(broker, spec, name=f"P2 fill {partitions}p")
        return []

    def run(self, broker: BrokerUnderTest, ctx: RunContext, run: int) -> list[Figure]:
        figures: list[Figure] = []
        for partitions in self.PARTITIONS:
            topic = f"p2-{partitions}p"
            spec = {"workload": "consume", "topic": topic, "records": ctx.sizes.p2_records}
            out = ctx.run_load(broker, spec, name=f"P2 {partitions}p")
            row = f"P2 consume {partitions}p (librdkafka)"
            figures += _throughput_figures(self.key, row, broker.name, run, out)
            if ctx.sizes.java:
                cpu0 = tree_cpu_s(broker.pid)
                try:
                    res = java_perf.consumer_perf(
                        broker.bootstrap,
                        topic,
                        records=ctx.sizes.p2_records,
                        work_dir=ctx.work_dir,
                    )
                except BenchError as exc:  # needs the group APIs; keep librdkafka's figures
                    ctx.soft_failures.append(f"ConsumerPerformance {partitions}p: {exc}")
                    continue
                cpu_s = tree_cpu_s(broker.pid) - cpu0
                row = f"P2 consume {partitions}p (Java perf-test)"
                gb = ctx.sizes.p2_records * ctx.sizes.record_bytes / 1e9
                figures += _java_figures(self.key, row, broker.name, run, res, cpu_s, gb)
        return figures

    def after_run(self, brokers: list[BrokerUnderTest], ctx: RunContext, run: int) -> list[Figure]:
        """The loopback ceiling: sendfile of the 1-partition topic's segment bytes, once a run."""
        for broker in brokers:
            segments = sorted((broker.log_dir / "p2-1p-0").glob("*.log"))
            if segments:
                break
        else:
            return []
        return _loopback_figures(self.key, measure_sendfile(segments, ctx.work_dir), run)


class P2LargeRecords(Scenario):
    """P2 with 64 KiB records: consume MiB/s beside the loopback sendfile ceiling of the same
    bytes measured in the same run, and the broker's CPU-seconds per GB consumed."""

    key = "P2L"
    title = "consume throughput, 64 KiB records"
    TOPIC: Final[str] = "p2l-1p"
    GOAL_OF_LIMIT_PCT: Final[float] = 50.0

    def __init__(self) -> None:
        # (run, broker, client) -> consume MiB/s, for the percentage of the loopback ceiling
        self._mib_per_s: dict[tuple[int, str, str], float] = {}

    def _row(self, ctx: RunContext, client: str = "librdkafka") -> str:
        return f"P2L consume 1p, {ctx.sizes.p2l_record_bytes >> 10} KiB records ({client})"

    def prepare(self, broker: BrokerUnderTest, ctx: RunContext) -> list[Figure]:
        create_topic(broker.bootstrap, self.TOPIC, 1)
        spec = _produce_spec(self.TOPIC, ctx.sizes.p2l_records, ctx.sizes.p2l_record_bytes)
        ctx.run_load(broker, spec, name="P2L fill")
        return []

    def run(self, broker: BrokerUnderTest, ctx: RunContext, run: int) -> list[Figure]:
        spec = {"workload": "consume", "topic": self.TOPIC, "records": ctx.sizes.p2l_records}
        out = ctx.run_load(broker, spec, name="P2L")
        figures = _throughput_figures(self.key, self._row(ctx), broker.name, run, out)
        self._mib_per_s[(run, broker.name, "librdkafka")] = next(
            f.value for f in figures if f.metric == "MiB/s"
        )
        for workload, client in (("fetch_drain", "bare Fetch loop"), ("kcat", "kcat")):
            out = ctx.run_load(broker, {**spec, "workload": workload}, name=f"P2L {workload}")
            got = _throughput_figures(self.key, self._row(ctx, client), broker.name, run, out)
            figures += got
            self._mib_per_s[(run, broker.name, client)] = next(
                f.value for f in got if f.metric == "MiB/s"
            )
        if ctx.sizes.java:
            cpu0 = tree_cpu_s(broker.pid)
            try:
                res = java_perf.consumer_perf(
                    broker.bootstrap, self.TOPIC, records=ctx.sizes.p2l_records,
                    work_dir=ctx.work_dir,
                )
            except BenchError as exc:
                ctx.soft_failures.append(f"ConsumerPerformance P2L: {exc}")
                return figures
            cpu_s = tree_cpu_s(broker.pid) - cpu0
            client = "Java perf-test"
            gb = ctx.sizes.p2l_records * ctx.sizes.p2l_record_bytes / 1e9
            figures += _java_figures(self.key, self._row(ctx, client), broker.name, run, res,
                                     cpu_s, gb)
            self._mib_per_s[(run, broker.name, client)] = res.mib_per_s
        return figures

    def after_run(self, brokers: list[BrokerUnderTest], ctx: RunContext, run: int) -> list[Figure]:
        """The loopback ceiling of the same segment bytes, then each broker's consume MiB/s
        as a percentage of it (the goal: at least GOAL_OF_LIMIT_PCT)."""
        for broker in brokers:
            segments = sorted((broker.log_dir / f"{self.TOPIC}-0").glob("*.log"))
            if segments:
                break
        else:
            return []
        limit = measure_sendfile(segments, ctx.work_dir)
        figures = _loopback_figures(self.key, limit, run)
        for (r, broker_name, client), mib_per_s in self._mib_per_s.items():
            if r == run:
                figures.append(
                    Figure(
                        scenario=self.key,
                        row=f"P2L consume ({client}) as % of the loopback ceiling "
                        f"(goal >= {self.GOAL_OF_LIMIT_PCT:.0f}%)",
                        metric="%",
                        broker=broker_name,
                        run=run,
                        value=100.0 * mib_per_s / limit.mib_per_s,
                        higher_is_better=True,
                    )
                )
        return figures


class P4Latency(Scenario):
    """End-to-end latency at each of ``Sizes.p4_rates``: one row per rate, the rates run
    in turn within each run (a topic of their own each).

    Before its measured runs each broker serves P4's load, unmeasured (``bench.warming``):
    runs of ``p4_warm_up.run_s`` seconds, the rates in turn, until the broker's CPU per
    record over a run stops falling. The general warm-up before the scenarios
    (``bench.runner.warm_up``) is produce, consume and small requests, not P4's paced
    produce with a consumer's long-polling fetches, and with P4 run alone a fresh JVM would
    meet those first in its measured runs (last session's first Kafka run at 10,000/s took
    twice the CPU per record of its others, after P5's warm-up)."""

    key = "P4"
    title = "end-to-end latency at fixed rates"

    def profile_labels(self, broker_name: str, ctx: RunContext) -> list[str]:
        """One flame graph per rate (``P4-<rate>-<broker>``) of the first run: py-spy
        samples the broker while that rate's producer and consumer run (it takes a core's
        share of the machine meanwhile, so that run's latencies are not comparable)."""
        if broker_name not in PROFILED:
            return []
        return [f"{self.key}-{rate}-{broker_name}" for rate in ctx.sizes.p4_rates]

    def prepare(self, broker: BrokerUnderTest, ctx: RunContext) -> list[Figure]:
        sizes = ctx.sizes
        warm_up = sizes.p4_warm_up
        if warm_up.max_s <= 0:
            return []
        per_rate_s = warm_up.run_s / len(sizes.p4_rates)
        runs = itertools.count()

        def one_run() -> RunFigures:
            n = next(runs)
            cpu_s = 0.0
            records = 0
            per_rate: RunFigures = {}
            for rate in sizes.p4_rates:
                topic = f"p4-warm-up-{n}-{rate}"
                create_topic(broker.bootstrap, topic, 1)
                rate_records = max(1, int(rate * per_rate_s))
                _, consumed = self._pair(broker, ctx, topic, rate, rate_records, 0,
                                         name=f"P4 warm-up @ {rate}")
                cpu_s += consumed.broker_cpu_s
                records += rate_records
                per_rate[f"broker CPU us/record @ {rate}"] = (
                    1e6 * consumed.broker_cpu_s / rate_records)
                per_rate[f"p99 ms @ {rate}"] = float(consumed.result["latency_ms"]["p99"])
            return {"broker CPU us/record": 1e6 * cpu_s / records, **per_rate}

        done = warm_until_steady(warm_up, one_run, "broker CPU us/record")
        load = (f"P4's load, {per_rate_s:g} s at each of "
                + ", ".join(f"{rate:,}" for rate in sizes.p4_rates) + " records/s")
        ctx.notes.append(describe(self.key, load, broker.name, warm_up, done))
        return []

    def run(self, broker: BrokerUnderTest, ctx: RunContext, run: int) -> list[Figure]:
        figures: list[Figure] = []
        for rate, label in zip(ctx.sizes.p4_rates,
                               self.profile_labels(broker.name, ctx) or
                               [""] * len(ctx.sizes.p4_rates), strict=True):
            with ctx.profiled(broker, label, enabled=run == 0 and bool(label)):
                figures += self._run_rate(broker, ctx, run, rate)
        return figures

    @staticmethod
    def _pair(broker: BrokerUnderTest, ctx: RunContext, topic: str, rate: int, records: int,
              unmeasured: int, *, name: str) -> tuple[LoadOutcome, LoadOutcome]:
        """P4's pair (``start_latency_pair``): ``records`` records at ``rate``/s on ``topic``,
        the first ``unmeasured`` not measured: their outcomes, (produced, consumed), the
        consumer's broker CPU spanning the producer's."""
        consume, produce = latency_specs(topic, rate, records, unmeasured,
                                         ctx.sizes.record_bytes, broker.bootstrap)
        with start_latency_pair(consume, produce, name=name, log_dir=ctx.work_dir / "p4-load",
                                cpu_pid=broker.pid, broker_name=broker.name) as pair:
            return pair.results(produce_timeout_s=records / rate + 120.0)

    def _run_rate(self, broker: BrokerUnderTest, ctx: RunContext, run: int,
                  rate: int) -> list[Figure]:
        sizes = ctx.sizes
        topic = f"p4-r{run}-{rate}"
        create_topic(broker.bootstrap, topic, 1)
        records = int(rate * sizes.p4_duration_s)
        unmeasured = int(rate * sizes.p4_unmeasured_s)
        produced, consumed = self._pair(broker, ctx, topic, rate, records, unmeasured,
                                        name=f"P4 @ {rate}")
        lat = consumed.result["latency_ms"]
        client_cpu_s = float(produced.result["cpu_s"]) + float(consumed.result["cpu_s"])
        common: dict[str, Any] = {
            "scenario": self.key,
            "row": f"P4 e2e latency @ {rate} rec/s",
            "broker": broker.name,
            "run": run,
            "broker_cpu_pct": cpu_pct(consumed.broker_cpu_s, consumed.wall_s),
            "client_cpu_pct": cpu_pct(client_cpu_s, float(consumed.result["elapsed_s"])),
        }
        figures = [
            Figure(metric=f"{name} ms", value=float(lat[name]), higher_is_better=False,
                   **common)
            for name in ("p50", "p99", "p99.9")
        ]
        # Whether the producer held the rate: records over the time to its last send, and
        # how far behind its schedule it fell at worst (it then sends in a burst).
        send_s = float(produced.result["send_s"])
        figures.append(Figure(metric="produced rec/s", value=records / send_s if send_s > 0
                              else 0.0, higher_is_better=True, **common))
        figures.append(Figure(metric="producer max behind schedule (ms)",
                              value=float(produced.result["max_behind_ms"]),
                              higher_is_better=False, **common))
        # Broker CPU over the consumer's lifetime (which spans the producer's) per record
        # produced and consumed.
        figures.append(Figure(metric="broker CPU us/record",
                              value=1e6 * consumed.broker_cpu_s / max(1, records),
                              higher_is_better=False, **common))
        return figures


class P5SmallRequests(Scenario):
    """P5 on a warm broker: before its measured runs, each broker serves P5's load,
    unmeasured, until its CPU per request stops falling (``bench.warming``). A fresh JVM takes
    ~20 s of this load to compile Kafka's produce path (its first 10-s run at ~140% of a
    core and a third of its warm rate, the second still warming); the general warm-up
    before the scenarios (bench.runner.warm_up) is too little of it. Both brokers get
    the same warm-up; what it did is in the report's notes."""

    key = "P5"
    title = "small requests"
    profile = True

    def _spec(self, ctx: RunContext, topic: str, duration_s: float) -> dict[str, Any]:
        sizes = ctx.sizes
        return {
            "workload": "small",
            "topic": topic,
            "producers": sizes.p5_producers,
            "duration_s": duration_s,
            "record_bytes": sizes.record_bytes,
        }

    def prepare(self, broker: BrokerUnderTest, ctx: RunContext) -> list[Figure]:
        warm_up = ctx.sizes.p5_warm_up
        if warm_up.max_s <= 0:
            return []
        topic = "p5-warmup"
        create_topic(broker.bootstrap, topic, 1)

        def one_run() -> RunFigures:
            out = ctx.run_load(broker, self._spec(ctx, topic, warm_up.run_s), name="P5 warm-up")
            requests = max(1, int(out.result["requests"]))
            return {"requests/s": requests / float(out.result["elapsed_s"]),
                    "broker CPU us/request": 1e6 * out.broker_cpu_s / requests}

        runs = warm_until_steady(warm_up, one_run, "broker CPU us/request")
        ctx.notes.append(describe(self.key, "P5's load", broker.name, warm_up, runs))
        return []

    def run(self, broker: BrokerUnderTest, ctx: RunContext, run: int) -> list[Figure]:
        sizes = ctx.sizes
        topic = f"p5-r{run}"
        create_topic(broker.bootstrap, topic, 1)
        out = ctx.run_load(broker, self._spec(ctx, topic, sizes.p5_duration_s), name="P5")
        res = out.result
        common: dict[str, Any] = {
            "scenario": self.key,
            "row": f"P5 {sizes.p5_producers} producers, 1 record/request",
            "broker": broker.name,
            "run": run,
            "broker_cpu_pct": cpu_pct(out.broker_cpu_s, out.wall_s),
            "client_cpu_pct": cpu_pct(float(res["cpu_s"]), float(res["elapsed_s"])),
        }
        return [
            Figure(
                metric="requests/s",
                value=res["requests"] / float(res["elapsed_s"]),
                higher_is_better=True,
                **common,
            ),
            Figure(
                metric="p99 ms",
                value=float(res["latency_ms"]["p99"]),
                higher_is_better=False,
                **common,
            ),
            # The efficiency figure: broker CPU over the load's lifetime per request served
            # (the requests outside the timed window, warm-up and metadata, are few).
            Figure(
                metric="broker CPU us/request",
                value=1e6 * out.broker_cpu_s / max(1, int(res["requests"])),
                higher_is_better=False,
                **common,
            ),
        ]


class P6Restart(Scenario):
    key = "P6"
    title = "restart with a full log"
    PARTITIONS: Final[int] = 20
    TOPIC: Final[str] = "p6-restart"

    def prepare(self, broker: BrokerUnderTest, ctx: RunContext) -> list[Figure]:
        sizes = ctx.sizes
        create_topic(broker.bootstrap, self.TOPIC, self.PARTITIONS)
        records = sizes.p6_size_bytes // sizes.p6_record_bytes
        spec = {**_produce_spec(self.TOPIC, records, sizes.p6_record_bytes), "timeout_s": 1800}
        out = ctx.run_load(broker, spec, name="P6 fill")
        written_gb = broker.topic_log_bytes(self.TOPIC) / 1e9
        if written_gb < 0.9 * sizes.p6_size_bytes / 1e9:
            raise BenchError(
                f"P6 fill left {written_gb:.2f} GB of log, not ~{sizes.p6_size_bytes / 1e9:g}"
            )
        row = f"P6 fill 20p, 1 KiB records ({sizes.p6_size_bytes / 1e9:g} GB)"
        figures = _throughput_figures(self.key, row, broker.name, 0, out)
        return [f for f in figures if f.metric == "MiB/s"]

    def run(self, broker: BrokerUnderTest, ctx: RunContext, run: int) -> list[Figure]:
        stop_s = broker.stop()
        probe = ctx.load(broker, {"workload": "probe", "topic": self.TOPIC}, name="P6 probe")
        try:
            probe.wait_line("ready", timeout_s=60.0)
            launched = time.monotonic()
            broker.launch()
            outcome = probe.result(timeout_s=400.0)
        finally:
            probe.kill()
        broker.wait_started()
        start_s = float(outcome.result["acked_monotonic_s"]) - launched
        common: dict[str, Any] = {
            "scenario": self.key,
            "broker": broker.name,
            "run": run,
            "higher_is_better": False,
        }
        return [
            Figure(
                row="P6 restart: launch to first produce ack", metric="s", value=start_s, **common
            ),
            Figure(row="P6 restart: clean stop", metric="s", value=stop_s, **common),
        ]


class ZeroCopy(Scenario):
    """A 1-partition consume on minikafka (sendfile) and minikafka-copy (copying fetch)."""

    key = "ZC"
    title = "zero-copy fetch vs copying fetch (minikafka only)"
    TOPIC: Final[str] = "zc-1p"

    def prepare(self, broker: BrokerUnderTest, ctx: RunContext) -> list[Figure]:
        create_topic(broker.bootstrap, self.TOPIC, 1)
        spec = _produce_spec(self.TOPIC, ctx.sizes.p2_records, ctx.sizes.record_bytes)
        ctx.run_load(broker, spec, name="ZC fill")
        return []

    def run(self, broker: BrokerUnderTest, ctx: RunContext, run: int) -> list[Figure]:
        spec = {"workload": "consume", "topic": self.TOPIC, "records": ctx.sizes.p2_records}
        out = ctx.run_load(broker, spec, name="ZC")
        row = "ZC consume 1p: sendfile (minikafka) vs copy (minikafka-copy)"
        return _throughput_figures(self.key, row, broker.name, run, out)


SCENARIOS: Final[dict[str, type[Scenario]]] = {
    "P1": P1Produce,
    "P2": P2Consume,
    "P2L": P2LargeRecords,
    "P4": P4Latency,
    "P5": P5SmallRequests,
    "P6": P6Restart,
    "ZC": ZeroCopy,
}
NOT_YET: Final[dict[str, str]] = {
    "P3": "P3 acks=all, 3 brokers, replication factor 3: not yet available (needs the cluster)",
}
