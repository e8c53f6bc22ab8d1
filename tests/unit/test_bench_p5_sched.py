"""bench.p5_sched: the split of the broker's time read from scheduler events, and its
variants (the measurement itself runs brokers and perf: see the module)."""

from __future__ import annotations

import os
import threading

import pytest

from bench.p5_sched import (
    idle_through_turns,
    parse_perf_stat,
    parse_variant,
    split_broker_time,
    thread_counters,
)
from bench.perf_script import SchedEvent, parse_events

BROKER, CLIENT = 100, 200

# One millisecond on two CPUs, as `perf script -F pid,tid,cpu,time,event,trace` prints it
# (bench.perf_script): the broker's loop (tid 100) runs on CPU 0, wakes a librdkafka thread
# of the client on its own core and the client's Python thread on the other, is preempted by
# the first, runs again, sleeps, and is woken onto CPU 1.
TRACE = """\
  100/100   [000]     1.000000: sched:sched_stat_runtime: comm=python pid=100 runtime=600000 [ns]
  200/201   [000]     1.000000: sched:sched_stat_runtime: comm=rdk:broker1 pid=201 runtime=200000 [ns]
  200/202   [001]     1.000000: sched:sched_stat_runtime: comm=python pid=202 runtime=100000 [ns]
    0/0     [000]     1.000000:       sched:sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=python next_pid=100 next_prio=120
  200/202   [001]     1.000000:       sched:sched_switch: prev_comm=python prev_pid=202 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
  100/100   [000]     1.000100:       sched:sched_waking: comm=rdk:broker1 pid=201 prio=120 target_cpu=000
  100/100   [000]     1.000100:       sched:sched_waking: comm=python pid=202 prio=120 target_cpu=001
  100/100   [000]     1.000200:       sched:sched_switch: prev_comm=python prev_pid=100 prev_prio=120 prev_state=R ==> next_comm=rdk:broker1 next_pid=201 next_prio=120
    0/0     [001]     1.000200:       sched:sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=python next_pid=202 next_prio=120
  200/202   [001]     1.000300:       sched:sched_switch: prev_comm=python prev_pid=202 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
  200/201   [000]     1.000400:       sched:sched_switch: prev_comm=rdk:broker1 prev_pid=201 prev_prio=120 prev_state=S ==> next_comm=python next_pid=100 next_prio=120
  100/100   [000]     1.000500:       sched:sched_switch: prev_comm=python prev_pid=100 prev_prio=120 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120
    0/0     [001]     1.000600:       sched:sched_waking: comm=python pid=100 prio=120 target_cpu=001
    0/0     [001]     1.000700:       sched:sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=python next_pid=100 next_prio=120
  100/100   [001]     1.001000: sched:sched_stat_runtime: comm=python pid=100 runtime=300000 [ns]
"""


def test_the_broker_time_splits_into_running_runnable_and_sleeping() -> None:
    split = split_broker_time(parse_events(TRACE), BROKER, CLIENT)
    assert split.broker_tid == 100
    us = {state: round(1e6 * s) for state, s in split.state_s.items()}
    assert us == {"running": 600, "runnable": 300, "sleeping": 100}
    assert dict(split.preempted_by) == {"client-rdk": 1}
    assert [round(w) for w in split.waits_us] == [200, 100]


def test_what_ran_on_the_broker_core_while_it_waited_and_the_idle_time() -> None:
    split = split_broker_time(parse_events(TRACE), BROKER, CLIENT)
    waiting = {kind: round(1e6 * s) for kind, s in split.ran_while_waiting_s.items()}
    # First wait: the client's librdkafka thread on the broker's core; second: that core
    # idle (the broker was woken onto the other one).
    assert waiting == {"client-rdk": 200, "idle": 100}
    assert round(1e6 * split.other_cpu_idle_while_waiting_s) == 200
    idle = {state: round(1e6 * s) for state, s in split.idle_s_by_broker_state.items()}
    assert idle == {"running": 600, "runnable": 300, "sleeping": 200}
    assert dict(split.wakeups_by_broker) == {"same core": 1, "other core": 1}
    # CPU 1 idle while the woken librdkafka thread waited on CPU 0 (100 us), and while the
    # loop waited there (100 us); CPU 0 idle while the loop, woken onto CPU 1, waited.
    elsewhere = {k: round(1e6 * s) for k, s in split.idle_while_queued_elsewhere_s.items()}
    assert elsewhere == {"client": 100, "broker-loop": 200}
    summary = split.summary()
    assert summary["trace_running_pct"] == pytest.approx(60.0)
    assert summary["trace_idle_pct"] == pytest.approx(55.0)
    assert summary["trace_woken_on_broker_core_pct"] == pytest.approx(50.0)
    assert summary["trace_client_on_broker_core_while_waiting_pct"] == pytest.approx(20.0)


def _switch(t_us: float, cpu: int, prev: int, nxt: int) -> SchedEvent:
    return SchedEvent(t_us / 1e6, cpu, 0, prev, "sched_switch",
                      {"prev_pid": str(prev), "prev_state": "S", "next_pid": str(nxt)})


def test_the_other_cores_idle_time_through_the_loops_turns() -> None:
    """The loop (tid 100, CPU 0) sends a turn's answers (three client threads woken at 0,
    5 and 10 us), runs until the next turn's answers (400-410 us); CPU 1 runs a client
    thread until 100 us, then idles until 500 us."""
    wake = [SchedEvent(t / 1e6, 0, BROKER, 100, "sched_waking", {"pid": str(tid)})
            for t, tid in ((0, 201), (5, 202), (10, 203), (400, 201), (405, 202), (410, 203))]
    clients = [SchedEvent(0.0, 1, CLIENT, tid, "sched_stat_runtime", {"pid": str(tid)})
               for tid in (201, 202, 203)]
    events = sorted([_switch(0, 0, 0, 100), _switch(0, 1, 0, 201), *clients, *wake,
                     _switch(100, 1, 201, 0), _switch(420, 0, 100, 0),
                     _switch(500, 1, 0, 201)], key=lambda e: e.time_s)
    turns = idle_through_turns(events, 100, CLIENT)
    # One cycle, 10-400 us: the loop's 390 us cut at 205 us; CPU 1 idle 105 of the first
    # 195 us and all of the second; idle during the sends (400-410 us): CPU 1's 10 us.
    assert turns["trace_cycles_per_s"] == pytest.approx(1 / 500e-6)
    assert turns["trace_loop_run_per_cycle_us"] == pytest.approx(390)
    assert turns["trace_other_idle_first_half_pct"] == pytest.approx(100 * 105 / 195)
    assert turns["trace_other_idle_second_half_pct"] == pytest.approx(100)
    assert turns["trace_sends_us_per_cycle"] == pytest.approx(10)
    assert turns["trace_idle_in_sends_us_per_cycle"] == pytest.approx(10)


def test_perf_stat_counts_per_event() -> None:
    text = ("1234,,syscalls:sys_enter_read,3000000000,100.00,,\n"
            "<not counted>,,syscalls:sys_enter_writev,0,0.00,,\n"
            "56,,sched:sched_switch,3000000000,100.00,,\n")
    assert parse_perf_stat(text) == {"read": 1234, "sched_switch": 56}


def test_variants() -> None:
    plain = parse_variant("minikafka")
    assert (plain.kind, plain.tree, plain.env, plain.producers, plain.client_nice,
            plain.broker_nice) == ("minikafka", None, (), 16, 0, 0)
    tree = parse_variant("minikafka@/tmp/main-tree+MINIKAFKA_IO_URING=0:p32:n5:b-5")
    assert str(tree.tree) == "/tmp/main-tree"
    assert tree.env == (("MINIKAFKA_IO_URING", "0"),)
    assert (tree.producers, tree.client_nice, tree.broker_nice, tree.broker) == (
        32, 5, -5, "minikafka@/tmp/main-tree+MINIKAFKA_IO_URING=0")
    assert parse_variant("kafka:n5").broker == "kafka"
    assert parse_variant("minikafka:s300").broker_slice_us == 300
    for bad in ("redpanda", "kafka+X=1", "minikafka:q3", "minikafka+NOVALUE", "minikafka:s0"):
        with pytest.raises(ValueError):
            parse_variant(bad)


def test_thread_counters_of_a_live_process() -> None:
    stop = threading.Event()
    worker = threading.Thread(target=stop.wait, name="waiting")
    worker.start()
    try:
        threads = thread_counters(os.getpid())
    finally:
        stop.set()
        worker.join()
    assert os.getpid() in threads and len(threads) >= 2
    me = threads[os.getpid()]
    assert me.run_s > 0 and me.slices > 0 and me.voluntary >= 0
