"""``bench.p4_trace``: a connection's bytes cut into Kafka frames segment by segment, a
record's latency split into parts that add up to it; ``bench.p4_sched``: perf's scheduler
record cut into each role's running and waiting time."""

from __future__ import annotations

import itertools
import struct

import pytest

from bench.p4_sched import Occupancy, Slice, add_runtimes, parse_timehist
from bench.p4_trace import FETCH, PARTS, PRODUCE, _Frames, analyse
from bench.perf_script import parse_runtimes


def _request(api_key: int, corr: int, body: bytes) -> bytes:
    rest = struct.pack(">hhi", api_key, 9, corr) + body
    return struct.pack(">i", len(rest)) + rest


def _answer(corr: int, body: bytes) -> bytes:
    rest = struct.pack(">i", corr) + body
    return struct.pack(">i", len(rest)) + rest


def test_frames_split_anywhere_are_cut_and_each_offset_gets_its_frames_correlation_id() -> None:
    stream = _request(PRODUCE, 7, b"a" * 30) + _request(FETCH, 8, b"") + _request(PRODUCE, 9, b"b" * 5)
    # offsets (in the stream) of a byte of the first body and of the third's
    first_body, third_body = 20, len(stream) - 2
    for cuts in ([], [3], [13, 14, 47], list(range(1, len(stream)))):
        frames = _Frames(requests=True, seq=0)
        ends: list[tuple[int, int]] = []
        corr_at: dict[int, int] = {}
        bounds = [0, *cuts, len(stream)]
        for lo, hi in itertools.pairwise(bounds):
            at = [o - lo for o in (first_body, third_body) if lo <= o < hi]
            corrs, segment_ends = frames.feed(stream[lo:hi], at)
            ends += segment_ends
            corr_at.update({o + lo: c for o, c in zip(at, corrs, strict=True)})
        assert ends == [(7, PRODUCE), (8, FETCH), (9, PRODUCE)], cuts
        assert corr_at == {first_body: 7, third_body: 9}, cuts


def test_bytes_sent_again_are_left_out_and_a_gap_stops_the_cutting() -> None:
    stream = _request(PRODUCE, 1, b"x" * 10) + _request(PRODUCE, 2, b"y" * 10)
    frames = _Frames(requests=True, seq=(1 << 32) - 5)  # the sequence numbers wrap
    first = frames.unseen((1 << 32) - 5, stream[:20])
    assert first == stream[:20]
    assert frames.unseen((1 << 32) - 5, stream[:20]) == b""  # all of it again
    rest = frames.unseen(((1 << 32) - 5 + 10) % (1 << 32), stream[10:])  # half again
    assert rest == stream[20:] and frames.retransmitted == 2 and frames.gaps == 0
    assert frames.feed(first, [])[1] + frames.feed(rest, [])[1] == [(1, PRODUCE), (2, PRODUCE)]
    assert frames.unseen(100, b"zz") == b"zz" and frames.gaps == 1
    assert frames.feed(_request(PRODUCE, 3, b""), []) == ([], [])  # no longer followed


def test_answers_have_no_api_key() -> None:
    frames = _Frames(requests=False, seq=0)
    assert frames.feed(_answer(3, b"xy") + _answer(4, b""), []) == ([], [(3, -1), (4, -1)])


def test_a_records_parts_add_up_to_its_latency() -> None:
    port, producer, consumer = 9092, 40000, 40001
    ms = 1_000_000
    stamp = 1_000 * ms
    segments = [
        # the consumer's fetch 1 answered (empty) at +0.2 ms, before the record is appended
        [stamp - 2 * ms, consumer, port, 20, [], [], [[1, FETCH]]],
        [stamp + ms // 5, port, consumer, 20, [], [], [[1, -1]]],
        # the produce in at +0.5 ms, appended (its answer) at +1.5 ms
        [stamp + ms // 2, producer, port, 200, [stamp], [11], [[11, PRODUCE]]],
        [stamp + 3 * ms // 2, port, producer, 20, [], [], [[11, -1]]],
        # the consumer's next fetch in at +3 ms, answered with the record at +3.25 ms
        [stamp + 3 * ms, consumer, port, 20, [], [], [[2, FETCH]]],
        [stamp + 13 * ms // 4, port, consumer, 200, [stamp], [2], [[2, -1]]],
    ]
    received_s, latency_ms = (stamp + 4 * ms) / 1e9, 4.0
    summary = analyse(segments, [[received_s, latency_ms]], port)
    assert summary["matched"] == 1
    tail = summary["tails"]["all"]
    assert tail["producer"] == pytest.approx(0.5)
    assert tail["broker append"] == pytest.approx(1.0)
    assert tail["no fetch out"] == pytest.approx(1.5)
    assert tail["broker answer"] == pytest.approx(0.25)
    assert tail["consumer"] == pytest.approx(0.75)
    assert sum(tail[part] for part in PARTS) == pytest.approx(latency_ms)
    # the fetch before it was answered (+0.2 ms) before the append (+1.5): not missed; the
    # consumer's turnaround from that answer to its next fetch, 2.8 ms
    assert tail["waited for a fetch"] == 1 and tail["missed by an earlier answer"] == 0
    assert tail["their turnaround mean"] == pytest.approx(2.8)
    assert summary["produce requests"]["in to answer out ms"]["p50"] == pytest.approx(1.0)


def test_the_scheduler_record_is_cut_into_running_and_waiting_time_by_role() -> None:
    lines = [
        "           time    cpu  task name                  wait time  sch delay   run time  state",
        "   10.002000 [0000]  python[100]                     0.000      0.500      1.000      R ",
        "   10.004000 [0001]  rdk:broker-1[201/200]           0.000      0.000      2.000      S ",
        "   10.004000 [0000]  other thing[300/300]            0.000      1.000      2.000      S ",
        "   10.005000 [0001]  <idle>[0]                       0.000      0.000      1.000      I ",
        # preempted at 10.002 s (R above), it ran again from 10.0045 s: 2.5 ms runnable
        "   10.005000 [0000]  python[100]                     2.500      0.000      0.500      S ",
    ]
    slices = parse_timehist(lines)
    assert [(s.pid, s.tid) for s in slices] == [(100, 100), (200, 201), (300, 300), (100, 100)]
    ms = 1_000_000
    broker = slices[0]  # woken at 10.0005 s, ran 10.001-10.002
    assert (broker.ready, broker.start, broker.end) == (10_000 * ms + ms // 2, 10_001 * ms,
                                                        10_002 * ms)
    assert slices[3].ready == 10_002 * ms
    occupancy = Occupancy(slices, {100: "broker", 200: "consumer"})
    window = (10_000 * ms, 10_005 * ms)
    assert occupancy.ns("broker", "running", *window) == ms + ms // 2
    assert occupancy.ns("broker", "waiting for a CPU", *window) == 3 * ms
    assert occupancy.ns("consumer", "running", *window) == 2 * ms
    assert occupancy.ns("other", "running", *window) == 2 * ms
    assert occupancy.ns("other", "waiting for a CPU", *window) == ms
    assert occupancy.ns("broker", "running", 10_002 * ms, 10_004 * ms) == 0


def test_time_on_a_cpu_not_charged_to_the_thread_counts_as_stolen() -> None:
    ms = 1_000_000
    # on its CPU from 10 to 30 ms; charged 1 ms up to 11 ms, then 1 ms up to 29 ms (the
    # virtual CPU away for 17 of those 18 ms), then 1 ms up to 30 ms
    runtimes = parse_runtimes(
        "    7/7     [000]     0.011000: sched:sched_stat_runtime: comm=python pid=7 runtime=1000000 [ns]\n"
        "    7/7     [000]     0.029000: sched:sched_stat_runtime: comm=python pid=7 runtime=1000000 [ns]\n"
        "    7/7     [000]     0.030000: sched:sched_stat_runtime: comm=python pid=7 runtime=1000000 [ns]\n"
        "    8/8     [001]     0.030000: sched:sched_stat_runtime: comm=other pid=8 runtime=1000000 [ns]\n"
        "    7/7     [000]     0.030000:       sched:sched_switch: prev_comm=python prev_pid=7 ==> next_comm=x\n")
    assert runtimes[7][1] == (29 * ms, ms) and list(runtimes) == [7, 8]
    (broker,) = add_runtimes([Slice(7, 7, 10 * ms, 10 * ms, 30 * ms)], runtimes)
    assert [until for until, _run in broker.runtimes] == [11 * ms, 29 * ms, 30 * ms]
    occupancy = Occupancy([broker], {7: "broker"})
    window = (10 * ms, 30 * ms)
    assert occupancy.ns("broker", "running", *window) == pytest.approx(3 * ms, abs=1_000)
    assert occupancy.ns("broker", "stolen", *window) == pytest.approx(17 * ms, abs=1_000)
