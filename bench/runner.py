"""Runs the selected scenarios against the brokers, interleaved A B A B, and stops them all.

Order: start every broker (minikafka first, then Kafka); for each scenario, prepare on each
broker, then for run 0..N-1 run it on minikafka, then on Kafka (A B A B ...), then any
broker-independent figures of that run (the loopback limit). A failing run is recorded as
a Failure and the bench goes on; a broker found dead is restarted on its log dir. Brokers
are stopped in ``finally`` (and by ``procs.stop_all`` at exit) whatever happens. A
scenario that starts brokers of its own (P7: a fresh one per partition count) gets the
shared ones only as templates; when every selected scenario is such, none is started.

Each broker is measured alone: while one is warmed up, prepared or run, every other broker
the bench started is paused (SIGSTOP to its process group, SIGCONT after: ``procs.paused``),
so that nothing else of the bench's runs on the machine meanwhile. Without it, the idle
Kafka JVM took 2.7-8.6% of a core on average during minikafka's P4 runs, in bursts of up to
40% over half a second, most in the seconds after its own work, on this 2-core machine
(bench/results/latency/2026-11-27-p4group.md). A paused broker keeps its state (a JVM its
compiled code), so each is as warm at its next run as it was at its last.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

from bench.admin import create_topic
from bench.brokers import BrokerUnderTest
from bench.context import PROFILED, RunContext
from bench.figures import Failure, Figure, Results
from bench.minikafka_broker import MiniKafka
from bench.procs import BenchError, paused, stop_all
from bench.registry import NOT_YET, SCENARIOS
from bench.scenarios import Scenario

COPY_ENV = {"MINIKAFKA_FETCH_COPY": "1"}


@dataclass(slots=True)
class Plan:
    scenarios: list[str]
    runs: int
    brokers: list[BrokerUnderTest]


def _log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _describe(figures: list[Figure]) -> str:
    return ", ".join(f"{f.metric}={f.value:,.4g}" for f in figures[:4])


def _attempt(
    results: Results, scenario: str, broker: BrokerUnderTest, run: int, step: Callable[[], None]
) -> bool:
    try:
        step()
        return True
    except BenchError as exc:
        message = str(exc)
        results.failures.append(Failure(scenario, broker.name, run, message))
        _log(f"{scenario} {broker.name} run {run} FAILED: {message.splitlines()[0][:300]}")
        return False


def _ensure_running(broker: BrokerUnderTest, results: Results) -> None:
    if broker.pid == 0:
        results.notes.append(f"{broker.name} was found stopped and was restarted")
        _log(f"{broker.name} is not running; restarting it")
        broker.start()


def _others_paused(
    broker: BrokerUnderTest | None, started: list[BrokerUnderTest]
) -> AbstractContextManager[None]:
    """Every broker of ``started`` but ``broker`` paused for the block (None: all of them)."""
    return paused([b.pid for b in started if b is not broker and b.pid])


def _run_scenario(
    scenario: Scenario, brokers: list[BrokerUnderTest], ctx: RunContext, runs: int,
    results: Results, started: list[BrokerUnderTest],
) -> None:
    """``started``: every broker the bench has running (each paused while another is
    measured; for a scenario that starts its own, all of them during its runs)."""
    active: list[BrokerUnderTest] = []
    for broker in brokers:
        _log(f"{scenario.key} prepare on {broker.name}")

        def prepare(b: BrokerUnderTest = broker) -> None:
            if scenario.uses_shared_broker:
                _ensure_running(b, results)
            with _others_paused(b if scenario.uses_shared_broker else None, started):
                results.figures.extend(scenario.prepare(b, ctx))

        if _attempt(results, scenario.key, broker, -1, prepare):
            active.append(broker)
        results.notes.extend(ctx.notes)
        ctx.notes.clear()
    for run in range(runs):
        for broker in active:

            def one_run(b: BrokerUnderTest = broker, r: int = run) -> None:
                if scenario.uses_shared_broker:
                    _ensure_running(b, results)
                profiled = scenario.profile and r == 0 and b.name in PROFILED
                with (_others_paused(b if scenario.uses_shared_broker else None, started),
                      ctx.profiled(b, f"{scenario.key}-{b.name}", enabled=profiled)):
                    figures = scenario.run(b, ctx, r)
                results.figures.extend(figures)
                _log(f"{scenario.key} run {r} {b.name}: {_describe(figures)}")

            _attempt(results, scenario.key, broker, run, one_run)
            for message in ctx.soft_failures:
                results.failures.append(Failure(scenario.key, broker.name, run, message))
                _log(f"{scenario.key} {broker.name} run {run} partly FAILED: {message[:300]}")
            ctx.soft_failures.clear()
        if active:
            with _others_paused(None, started):
                results.figures.extend(scenario.after_run(active, ctx, run))


def warm_up(broker: BrokerUnderTest, ctx: RunContext) -> None:
    """Unmeasured traffic before the first scenario, so the JVM's JIT has compiled the hot
    paths (and minikafka's caches are as warm): produce and consume warmup_records records,
    then small requests for a few seconds."""
    records = ctx.sizes.warmup_records
    if records <= 0:
        return
    create_topic(broker.bootstrap, "warmup", 1)
    base = {"topic": "warmup", "record_bytes": ctx.sizes.record_bytes}
    ctx.run_load(broker, {**base, "workload": "produce", "records": records}, name="warm-up")
    ctx.run_load(broker, {**base, "workload": "consume", "records": records}, name="warm-up")
    ctx.run_load(
        broker,
        {**base, "workload": "small", "producers": 4, "duration_s": 3.0},
        name="warm-up",
    )


def run_plan(plan: Plan, ctx: RunContext) -> Results:
    results = Results()
    started: list[BrokerUnderTest] = []
    shared = any(SCENARIOS[k].uses_shared_broker for k in plan.scenarios if k in SCENARIOS)
    try:
        for broker in plan.brokers if shared else []:
            _log(f"starting {broker.name}")
            broker.start()
            started.append(broker)
            _log(f"{broker.name} up at {broker.bootstrap} (pid {broker.pid})")
        if len(started) > 1:
            results.notes.append(
                "Each broker was measured alone: while one was warmed up, prepared or run, "
                "the other brokers were paused (SIGSTOP, SIGCONT after)"
            )
        for broker in started:
            _log(f"warming up {broker.name}")
            with _others_paused(broker, started):
                warm_up(broker, ctx)
        for key in plan.scenarios:
            if key in NOT_YET:
                results.notes.append(NOT_YET[key])
                _log(NOT_YET[key])
                continue
            scenario = SCENARIOS[key]()
            _log(f"== {key}: {scenario.title}")
            if key == "ZC":
                _run_zero_copy(scenario, plan, ctx, results, started)
            else:
                _run_scenario(scenario, plan.brokers, ctx, plan.runs, results, started)
    finally:
        for broker in started:
            _log(f"stopping {broker.name}")
            broker.stop()
        stop_all()
    return results


def _run_zero_copy(
    scenario: Scenario,
    plan: Plan,
    ctx: RunContext,
    results: Results,
    started: list[BrokerUnderTest],
) -> None:
    minikafka = next((b for b in plan.brokers if isinstance(b, MiniKafka)), None)
    if minikafka is None:
        results.notes.append("ZC skipped: minikafka is not among the brokers of this run")
        return
    copying = MiniKafka(ctx.work_dir / "minikafka-copy", name="minikafka-copy", env=COPY_ENV)
    _log("starting minikafka-copy (MINIKAFKA_FETCH_COPY=1)")
    try:
        copying.start()
    except BenchError as exc:
        results.failures.append(Failure("ZC", copying.name, -1, str(exc)))
        return
    started.append(copying)
    try:
        _run_scenario(scenario, [minikafka, copying], ctx, plan.runs, results, started)
    finally:
        copying.stop()
        started.remove(copying)
        copying.wipe()
