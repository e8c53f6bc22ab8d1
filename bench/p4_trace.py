"""Where P4's end-to-end time goes, record by record: ``python -m bench.p4_trace``.

P4's load (``bench.load`` ``latency_produce`` and ``latency_consume``, librdkafka on both
sides, the bench's settings) runs against one broker (``--broker minikafka`` or ``kafka``)
while a packet socket on the loopback device (``AF_PACKET``, a classic BPF filter for the
broker's port, kernel time stamps; root only) sees every TCP segment to and from the broker
when its sender hands it to the device. Each record's value starts with its send time
(CLOCK_MONOTONIC, ``bench.load``); the segments that carry it are found by that stamp (8
bytes followed by the value's 92 zero bytes, in the window's time range), so that each
record gets four times:

- ``sent``: the producer's ``produce()`` call (the stamp);
- ``produce in``: the segment that ends the Produce request carrying it (its last byte
  leaving the producer's librdkafka thread);
- ``appended``: the record was in the log by the time its Produce request's answer or the
  Fetch answer with the record went out, whichever was first;
- ``fetch in``: the segment that ends the consumer's Fetch request answered with it;
- ``answer out``: the segment that ends that Fetch answer;
- ``received``: the consumer's Python loop got it from ``poll()`` (the consumer reports
  each sample's receive time: ``outliers_ms``).

The capture follows each connection's bytes (TCP sequence numbers: a segment TCP sent again
is left out) and cuts them into Kafka frames (size, then the correlation id, and a
request's api key), so requests and answers are paired by correlation id. The record's
latency is split into five parts that add up to it:

- ``producer``: produce in - sent (librdkafka's queue, its thread's wake-up, the write);
- ``broker append``: appended - produce in: the broker reading the request, waiting for its
  turn (after the requests before it on the connection, or the loop held up), appending,
  and, for a fetch parked waiting for data, waking it and writing its answer;
- ``no fetch out``: max(0, fetch in - appended): the record was in the log but the consumer
  had no Fetch request at the broker that would return it: its previous answer travelling
  or being handled by librdkafka (its thread busy or waiting for a core), or that answer
  left after the append without the record (counted as "missed by an earlier answer");
- ``broker answer``: answer out - max(appended, fetch in): the broker answering a fetch that
  came after the append (near 0 for a parked fetch, whose answer is written with the append);
- ``consumer``: received - answer out (librdkafka's thread reading and parsing the answer,
  its queue, the Python ``poll()``).

Reported: each Produce request's time in the broker (last byte in to its answer's last byte
out) and how many were waiting when it came in; the consumer's turnaround (a Fetch answer
out to its next Fetch request in); percentiles of each part over all records, and for the
records at or above the latency's p99 and p99.9 the mean of each part (what the tail is
made of). The capture costs CPU (a Python process receiving every segment; parsed after
the load stops), so on this 2-core machine it moves the latencies themselves: compare parts
and brokers within one run, not with a bench run.

Before the traced run the broker is warmed up as the bench's P4 warms it (``warm_up``:
``bench.scenarios.P4Latency.prepare``, ``bench.warming``'s rule): P4's load at the bench's
rates in turn, not captured, in runs of 10 s for 30-90 s (``bench.context.P4_WARM_UP``),
until the broker's CPU per record stops falling over two runs in a row (a JVM compiles its
paths meanwhile), so that the trace meets the broker the bench's measured runs meet; its
note (each run's figures) is printed once it ends.
``--no-broker-warm-up`` skips it (a cold broker: to try the capture and its analysis
quickly, or to see a cold broker's tail). ``--again WORK_DIR`` analyses a run's saved
capture again.
"""

from __future__ import annotations

import argparse
import bisect
import ctypes
import itertools
import json
import re
import signal
import socket
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from bench.p4_sched import Occupancy, format_tail, read_slices, record_argv, tail_sched

if TYPE_CHECKING:
    from bench.brokers import BrokerUnderTest
    from bench.context import Sizes

ETH_P_ALL: Final[int] = 0x0003
SO_ATTACH_FILTER: Final[int] = 26
SO_TIMESTAMPNS: Final[int] = 35
SO_RCVBUFFORCE: Final[int] = 33
SOL_PACKET: Final[int] = 263
PACKET_STATISTICS: Final[int] = 6
PACKET_OUTGOING: Final[int] = 4
VALUE_BYTES: Final[int] = 100  # bench.load's record: 8-byte stamp + 92 zero bytes
_STAMP: Final[re.Pattern[bytes]] = re.compile(rb"(?=(.{8})\x00{%d})" % (VALUE_BYTES - 8), re.S)
_TIMESPEC: Final[struct.Struct] = struct.Struct("@qq")
PARTS: Final[tuple[str, ...]] = ("producer", "broker append", "no fetch out", "broker answer",
                                  "consumer")
PRODUCE: Final[int] = 0  # api keys
FETCH: Final[int] = 1
SCHED_DATA: Final[str] = "sched.data"  # --sched: perf's recording, in the work dir
ROLES_JSON: Final[str] = "roles.json"  # --sched: pid -> role (bench.p4_sched.ROLES)


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8),
                ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_SockFilter))]


def _port_filter(port: int) -> tuple[bytes, Any]:
    """A classic BPF program: IPv4 TCP segments from or to ``port`` (the loopback device's
    frames have a 14-byte Ethernet header)."""
    program = [
        (0x28, 0, 0, 12),          # ldh [12]            ether type
        (0x15, 0, 8, 0x0800),      # jeq IPv4 else drop
        (0x30, 0, 0, 23),          # ldb [23]            IP protocol
        (0x15, 0, 6, 6),           # jeq TCP else drop
        (0xB1, 0, 0, 14),          # ldxb 4*([14]&0xf)   IP header length
        (0x48, 0, 0, 14),          # ldh [x+14]          source port
        (0x15, 2, 0, port),        # jeq port: accept
        (0x48, 0, 0, 16),          # ldh [x+16]          destination port
        (0x15, 0, 1, port),        # jeq port: accept, else drop
        (0x06, 0, 0, 0x40000),     # accept (256 KiB)
        (0x06, 0, 0, 0),           # drop
    ]
    filters = (_SockFilter * len(program))(*[_SockFilter(*ins) for ins in program])
    fprog = _SockFprog(len(program), filters)
    return bytes(memoryview(fprog).cast("B")), filters  # (the array must outlive the call)


class _Frames:
    """One direction of one connection's byte stream, cut into Kafka frames (a 4-byte size,
    then a request header, api key, version and correlation id, or a response header, the
    correlation id), fed segment by segment in the order they were sent."""

    def __init__(self, *, requests: bool, seq: int) -> None:
        self.seq = seq  # the TCP sequence number of the next byte
        self.lost = False  # the capture missed bytes of it: frames no longer followed
        self.retransmitted = 0  # segments TCP sent again (bytes seen before)
        self.gaps = 0
        self.header_bytes = 12 if requests else 8
        self.requests = requests
        self.head = b""  # the current frame's header bytes, while incomplete
        self.left = 0  # bytes of the current frame still to come, once its header is read
        self.frame: tuple[int, int] = (-1, -1)  # (correlation id, api key or -1)

    def unseen(self, seq: int, payload: bytes) -> bytes:
        """The part of a segment's ``payload`` (starting at TCP sequence number ``seq``) not
        seen before: none of a segment TCP sent again (a retransmission, seen on this
        loopback when the receiving side's backlog overflowed), and after a gap (bytes the
        capture missed) the frames are no longer followed."""
        end = (seq + len(payload)) % (1 << 32)
        seen = (self.seq - seq) % (1 << 32)
        if 0 < seen < 1 << 31:
            self.retransmitted += 1
            if seen >= len(payload):
                return b""
            payload = payload[seen:]
        elif seen != 0:
            self.gaps += 1
            self.lost = True
        self.seq = end
        return payload

    def feed(self, payload: bytes, at: list[int]) -> tuple[list[int], list[tuple[int, int]]]:
        """The correlation id of the frame holding each offset in ``at`` (of this segment's
        payload; -1 in a header), and the (correlation id, api key) of each frame that
        ends in this segment."""
        corrs = [-1] * len(at)
        ends: list[tuple[int, int]] = []
        if self.lost:
            return corrs, ends
        pos, n = 0, len(payload)
        while pos < n:
            if self.left == 0:  # a header, whole or in part
                take = min(self.header_bytes - len(self.head), n - pos)
                self.head += payload[pos:pos + take]
                pos += take
                if len(self.head) < self.header_bytes:
                    break
                size = int.from_bytes(self.head[:4], "big")
                if self.requests:
                    api_key = int.from_bytes(self.head[4:6], "big")
                    corr = int.from_bytes(self.head[8:12], "big", signed=True)
                else:
                    api_key, corr = -1, int.from_bytes(self.head[4:8], "big", signed=True)
                self.frame, self.head = (corr, api_key), b""
                self.left = size + 4 - self.header_bytes
                if self.left <= 0:
                    self.left = 0
                    ends.append(self.frame)
                continue
            take = min(self.left, n - pos)
            for i, offset in enumerate(at):
                if pos <= offset < pos + take:
                    corrs[i] = self.frame[0]
            pos += take
            self.left -= take
            if self.left == 0:
                ends.append(self.frame)
        return corrs, ends


def sniff(port: int, out: Path, lo: int, hi: int) -> int:
    """Capture the broker's segments until SIGTERM; write them to ``out`` (JSON lines: kernel
    time CLOCK_MONOTONIC ns, source port, destination port, payload bytes, the record stamps
    in the payload within [lo, hi])."""
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    prog, _keep = _port_filter(port)
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, prog)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 256 << 20)  # past rmem_max (root)
    sock.bind(("lo", 0))
    offset = time.time_ns() - time.monotonic_ns()  # CLOCK_REALTIME -> CLOCK_MONOTONIC
    rows: list[tuple[int, int, int, int, list[int], list[int], list[tuple[int, int]]]] = []
    stop = False

    def on_term(_signum: int, _frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    sock.settimeout(0.2)
    print("ready", flush=True)
    # While the load runs, only receive and keep (as little CPU as can be taken from the
    # load); parsed once it stops.
    raw: list[tuple[bytes, list[tuple[int, int, bytes]]]] = []
    recvmsg = sock.recvmsg
    while not stop:
        try:
            data, anc, _flags, addr = recvmsg(1 << 18, 64)
        except (TimeoutError, InterruptedError):
            continue
        if addr[2] == PACKET_OUTGOING:  # each loopback segment is seen leaving and arriving
            raw.append((data, anc))
    sock.setblocking(False)
    while True:  # what the socket still holds
        try:
            data, anc, _flags, addr = recvmsg(1 << 18, 64)
        except (BlockingIOError, InterruptedError):
            break
        if addr[2] == PACKET_OUTGOING:
            raw.append((data, anc))
    finditer = _STAMP.finditer
    unpack = struct.Struct(">q").unpack
    flows: dict[tuple[int, int], _Frames] = {}
    for data, anc in raw:
        ts = 0
        for level, kind, cdata in anc:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                sec, nsec = _TIMESPEC.unpack_from(cdata)
                ts = sec * 1_000_000_000 + nsec - offset
        tcp = 14 + (data[14] & 0x0F) * 4
        sport, dport, seq = struct.unpack_from(">HHI", data, tcp)
        payload = data[tcp + (data[tcp + 12] >> 4) * 4:]
        if not payload:
            continue
        frames = flows.setdefault((sport, dport), _Frames(requests=dport == port, seq=seq))
        payload = frames.unseen(seq, payload)
        if not payload:
            continue
        stamps = []
        at = []
        for m in finditer(payload):
            (value,) = unpack(m.group(1))
            if lo <= value <= hi:
                stamps.append(value)
                at.append(m.start())
        corrs, ends = frames.feed(payload, at)
        rows.append((ts, sport, dport, len(payload), stamps, corrs, ends))
    # Segments the socket dropped (its buffer full: the capture fell behind), since it opened.
    _packets, drops = struct.unpack("II", sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8))
    retransmitted = sum(f.retransmitted for f in flows.values())
    gaps = sum(f.gaps for f in flows.values())
    with out.open("w") as f:
        f.write(json.dumps({"dropped": drops, "retransmitted": retransmitted, "gaps": gaps})
                + "\n")
        for row in rows:
            f.write(json.dumps(row) + "\n")
    return 0


def _segments(path: Path) -> tuple[list[list[Any]], dict[str, int]]:
    """The capture's segments, and its counts: segments the socket dropped, segments sent
    again by TCP (left out), gaps in a connection's bytes (its frames not followed after)."""
    lines = path.read_text().splitlines()
    head: dict[str, int] = json.loads(lines[0]) if lines else {"dropped": 0}
    segments = [json.loads(line) for line in lines[1:]]
    if segments and len(segments[0]) < 7:
        raise SystemExit(f"{path}: a capture without its frames (made before they were "
                         "recorded): not analysable by this version")
    return segments, head


def _pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def _pcts(values: list[float]) -> dict[str, float]:
    return {f"p{p:g}": _pct(values, p) for p in (50, 90, 99, 99.9)}


def analyse(segments: list[list[Any]], samples: list[list[float]], broker_port: int,
            occupancy: Occupancy | None = None) -> dict[str, Any]:
    """Each sampled record's parts (see the module docstring) and their summaries; with
    ``occupancy`` (``bench.p4_sched``), what the CPUs did during each part in the tails."""
    request_end: dict[tuple[int, int], tuple[int, int]] = {}  # (port, corr) -> (time, api key)
    answer_end: dict[tuple[int, int], int] = {}  # (port, corr) -> time
    produced_in: dict[int, tuple[int, int]] = {}  # stamp -> (producer port, corr)
    fetched_by: dict[int, tuple[int, int]] = {}  # stamp -> (consumer port, corr)
    for ts, sport, dport, _n, stamps, corrs, ends in segments:
        to_broker = dport == broker_port
        client = sport if to_broker else dport
        for corr, api_key in ends:
            if to_broker:
                request_end.setdefault((client, corr), (ts, api_key))
            else:
                answer_end.setdefault((client, corr), ts)
        found = produced_in if to_broker else fetched_by
        for stamp, corr in zip(stamps, corrs, strict=True):
            if corr >= 0:
                found.setdefault(stamp, (client, corr))
    # Each consumer connection's Fetch requests in order: (request in, answer out).
    fetches: dict[int, list[tuple[int, int]]] = {}
    for (client, corr), (ts, api_key) in request_end.items():
        if api_key == FETCH and (client, corr) in answer_end:
            fetches.setdefault(client, []).append((ts, answer_end[(client, corr)]))
    for rows_of in fetches.values():
        rows_of.sort()
    fetch_answers = {client: sorted(a for _f, a in rows_of) for client, rows_of in fetches.items()}

    rows: list[dict[str, float]] = []
    missing = 0
    for received_s, latency_ms in samples:
        received = round(received_s * 1e9)
        sent = received - round(latency_ms * 1e6)
        # the stamp is exact in ns; the float round trip is within a microsecond
        stamp = next((s for s in (sent, sent - 1, sent + 1) if s in produced_in), None)
        if stamp is None or stamp not in fetched_by:
            missing += 1
            continue
        producer_key, consumer_key = produced_in[stamp], fetched_by[stamp]
        if (producer_key not in request_end or consumer_key not in request_end
                or consumer_key not in answer_end):
            missing += 1
            continue
        p_in = request_end[producer_key][0]
        f_in = request_end[consumer_key][0]
        a_out = answer_end[consumer_key]
        # Appended by the time its Produce answer or the Fetch answer with it went out.
        appended = max(p_in, min(answer_end.get(producer_key, a_out), a_out))
        answered = fetch_answers[consumer_key[0]]
        i = bisect.bisect_left(answered, f_in)
        previous_out = answered[i - 1] if i > 0 else f_in
        rows.append({
            "latency": latency_ms,
            "producer": (p_in - stamp) / 1e6,
            "broker append": (appended - p_in) / 1e6,
            "no fetch out": max(0, f_in - appended) / 1e6,
            "broker answer": (a_out - max(appended, f_in)) / 1e6,
            "consumer": (received - a_out) / 1e6,
            "parked": 1.0 if f_in <= appended else 0.0,
            # the consumer's previous Fetch answer, from its leaving the broker to the next
            # Fetch request (this record's) coming in: the client's turnaround
            "turnaround": (f_in - previous_out) / 1e6,
            # the previous answer left after this record was appended, without it
            "missed": 1.0 if f_in > appended and previous_out >= appended else 0.0,
            # the times the parts were cut at (ns; bench.p4_sched)
            "sent": float(stamp), "produce in": float(p_in), "appended": float(appended),
            "fetch in": float(f_in), "answer out": float(a_out), "received": float(received),
        })
    summary: dict[str, Any] = {"records": len(samples), "matched": len(rows), "missing": missing}
    produce_times = sorted(
        (request_end[key][0], answer_end[key]) for key in request_end
        if request_end[key][1] == PRODUCE and key in answer_end)
    if produce_times:
        # Each Produce request, from its last byte in to its answer's last byte out, and how
        # many were in the broker (in, not yet answered) when it came in.
        outs = sorted(out for _in, out in produce_times)
        waiting = [i - bisect.bisect_right(outs, t_in) for i, (t_in, _o) in enumerate(produce_times)]
        summary["produce requests"] = {
            "requests": len(produce_times),
            "in to answer out ms": _pcts([(out - t_in) / 1e6 for t_in, out in produce_times]),
            "waiting when one came in": _pcts([float(w) for w in waiting]),
        }
    turnarounds = [a_in - prev_out for rows_of in fetches.values()
                   for (_f, prev_out), (a_in, _a) in itertools.pairwise(rows_of)]
    if turnarounds:
        summary["fetch requests"] = {
            "requests": sum(len(r) for r in fetches.values()),
            "previous answer out to next request in ms": _pcts([t / 1e6 for t in turnarounds]),
            "request in to answer out ms": _pcts(
                [(a - f) / 1e6 for rows_of in fetches.values() for f, a in rows_of]),
        }
    if not rows:
        return summary
    lat = [r["latency"] for r in rows]
    summary["latency"] = _pcts(lat)
    summary["parts"] = {part: _pcts([r[part] for r in rows]) for part in PARTS}
    tails: dict[str, Any] = {}
    for p in (50.0, 99.0, 99.9):
        bound = _pct(lat, p)
        tail = [r for r in rows if r["latency"] >= bound] if p > 50 else rows
        waited = [r for r in tail if r["no fetch out"] > 0]
        tails[f">= p{p:g}" if p > 50 else "all"] = {
            "records": len(tail),
            "mean latency": statistics.fmean(r["latency"] for r in tail),
            "parked": sum(1 for r in tail if r["parked"]),
            **{part: statistics.fmean(r[part] for r in tail) for part in PARTS},
            # which part was the largest, per record
            "largest": {part: sum(1 for r in tail if max(PARTS, key=r.__getitem__) == part)
                        for part in PARTS},
            # of the records that waited for a fetch: the consumer's turnaround before the
            # fetch that took them, and how many a previous answer had missed
            "waited for a fetch": len(waited),
            "their turnaround mean": (statistics.fmean(r["turnaround"] for r in waited)
                                      if waited else 0.0),
            "missed by an earlier answer": sum(1 for r in waited if r["missed"]),
        }
        if occupancy is not None:
            tails[f">= p{p:g}" if p > 50 else "all"]["sched"] = tail_sched(tail, occupancy)
    summary["tails"] = tails
    return summary


def _counts(counts: dict[str, int]) -> str:
    return (f"{counts.get('dropped', 0):,} dropped by the capture, "
            f"{counts.get('retransmitted', 0):,} sent again by TCP (left out), "
            f"{counts.get('gaps', 0):,} gaps")


def _print(summary: dict[str, Any]) -> None:
    print(f"records sampled {summary['records']:,}, matched with their segments "
          f"{summary['matched']:,}")
    for name in ("produce requests", "fetch requests"):
        if name in summary:
            info = summary[name]
            print(f"{name} ({info['requests']:,}): " + "; ".join(
                f"{what} " + ", ".join(f"{k} {v:.3g}" for k, v in pcts.items())
                for what, pcts in info.items() if isinstance(pcts, dict)))
    if "latency" not in summary:
        return
    print("latency ms: " + ", ".join(f"{k} {v:.3f}" for k, v in summary["latency"].items()))
    print("parts, percentiles over all records (ms):")
    for part, pcts in summary["parts"].items():
        print(f"  {part:>16}: " + ", ".join(f"{k} {v:.3f}" for k, v in pcts.items()))
    print("mean of each part (ms) over the records at or above a latency percentile; how many "
          "records had each part as their largest:")
    for name, t in summary["tails"].items():
        print(f"  {name:>8} ({t['records']:,} records, {t['parked']:,} met a parked fetch, "
              f"mean {t['mean latency']:.3f}): "
              + ", ".join(f"{part} {t[part]:.3f}" for part in PARTS)
              + "; largest: " + ", ".join(f"{part} {n}" for part, n in t["largest"].items())
              + f"; {t['waited for a fetch']:,} waited for a fetch (the consumer's turnaround "
              f"before it {t['their turnaround mean']:.3f} on average; "
              f"{t['missed by an earlier answer']:,} missed by an earlier answer)")
    for name, t in summary["tails"].items():
        if "sched" in t:
            print("\n".join(format_tail(name, t["sched"])))


def _occupancy(work: Path) -> Occupancy | None:
    """The scheduler's record of a run made with ``--sched``, if there is one."""
    if not (work / SCHED_DATA).exists():
        return None
    roles = {int(pid): role for pid, role in json.loads((work / ROLES_JSON).read_text()).items()}
    return Occupancy(read_slices(work / SCHED_DATA), roles)


def warm_up(broker: BrokerUnderTest, log_dir: Path, sizes: Sizes | None = None) -> str:
    """The bench's P4 warm-up on ``broker`` (``bench.scenarios.P4Latency.prepare``: P4's
    load at ``sizes.p4_rates`` in turn, not captured, until ``bench.warming``'s rule with
    ``sizes.p4_warm_up`` says the broker is steady; the bench's full sizes by default), the
    pairs' logs in ``log_dir``: the note it leaves, each run's figures."""
    from bench.context import FULL, RunContext
    from bench.scenarios import P4Latency

    ctx = RunContext(work_dir=log_dir, results_dir=log_dir, sizes=sizes or FULL)
    P4Latency().prepare(broker, ctx)
    return "; ".join(ctx.notes)


def main(argv: list[str] | None = None) -> int:
    args_in = sys.argv[1:] if argv is None else argv
    if args_in[:1] == ["--sniff"]:
        return sniff(int(args_in[1]), Path(args_in[2]), int(args_in[3]), int(args_in[4]))
    from bench.admin import create_topic
    from bench.kafka_broker import ApacheKafka
    from bench.load_procs import start_latency_pair
    from bench.load_specs import latency_specs
    from bench.minikafka_broker import MiniKafka
    from bench.procs import BenchError, spawn, spawn_ready, stop, tree_pids

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--broker", choices=("minikafka", "kafka"), default="minikafka")
    parser.add_argument("--rate", type=int, default=10_000, help="records/s")
    parser.add_argument("--warmup-s", type=float, default=3.0)
    parser.add_argument("--window-s", type=float, default=10.0)
    parser.add_argument("--no-broker-warm-up", action="store_true",
                        help="trace a cold broker: no warm-up first (by default the bench's P4 "
                        "warm-up: its load until the broker's CPU per record stops falling)")
    parser.add_argument("--out-dir", type=Path, default=Path(tempfile.gettempdir()) / "p4-trace")
    parser.add_argument("--json", type=Path, default=None, help="also write the summary here")
    parser.add_argument("--sched", action="store_true",
                        help="also record the scheduler's events (perf sched) and say what the "
                        "CPUs did during each part of the tail's records (bench.p4_sched)")
    parser.add_argument("--capture-only", action="store_true",
                        help="save the run, analyse it later with --again (in a quiet slot: "
                        "the analysis's minute of CPU is not spent there)")
    parser.add_argument("--again", type=Path, default=None, metavar="WORK_DIR",
                        help="analyse a run's work dir again (no load)")
    args = parser.parse_args(args_in)
    if args.again is not None:
        run = json.loads((args.again / "run.json").read_text())
        segments, counts = _segments(args.again / "segments.jsonl")
        summary = analyse(segments, run["consumed"].get("outliers", []), run["port"],
                          _occupancy(args.again))
        print(f"{len(segments):,} segments with data captured; {_counts(counts)}")
        _print(summary)
        if args.json is not None:
            summary.update(segments=len(segments), **counts,
                           bench_latency_ms=run["consumed"]["latency_ms"])
            args.json.write_text(json.dumps(summary, indent=1))
        return 0
    args.out_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"{args.broker}-{args.rate}-", dir=args.out_dir))
    broker: BrokerUnderTest = (MiniKafka(work / "broker") if args.broker == "minikafka"
                               else ApacheKafka(work / "broker"))
    broker.start()
    sniffer = perf = None
    try:
        if not args.no_broker_warm_up:
            print(warm_up(broker, work / "warm-up"), flush=True)
        topic = "p4-trace"
        create_topic(broker.bootstrap, topic, 1)
        records = int(args.rate * (args.warmup_s + args.window_s))
        warmup = int(args.rate * args.warmup_s)
        port = int(broker.bootstrap.rsplit(":", 1)[1])
        now = time.monotonic_ns()
        segments_path = work / "segments.jsonl"
        sniffer = spawn_ready([sys.executable, "-m", "bench.p4_trace", "--sniff", str(port),
                               str(segments_path), str(now), str(now + int(3600e9))],
                              log_path=work / "sniffer.log", what="the capture")
        consume, produce = latency_specs(
            topic, args.rate, records, warmup, VALUE_BYTES, broker.bootstrap,
            outliers_ms=1e-6, max_outliers=records, timeout_s=args.warmup_s + args.window_s + 60)
        if args.sched:
            perf = spawn(record_argv(work / SCHED_DATA), log_path=work / "perf.log")
        with start_latency_pair(consume, produce, name="P4", log_dir=work) as pair:
            roles = {**{p: "broker" for p in tree_pids(broker.pid)},
                     pair.producer.proc.pid: "producer", pair.consumer.proc.pid: "consumer",
                     sniffer.pid: "capture", **({perf.pid: "capture"} if perf else {})}
            (work / ROLES_JSON).write_text(json.dumps(roles))
            produced_out, consumed_out = pair.results(produce_timeout_s=records / args.rate + 120)
    except BenchError as exc:
        print(f"load failed: {exc}", file=sys.stderr)
        return 1
    finally:  # (the capture and perf write their files as they stop, before the analysis)
        if sniffer is not None:
            stop(sniffer, grace_s=120)
        if perf is not None:
            stop(perf, grace_s=120, sig=signal.SIGINT)  # perf writes its file on SIGINT
        broker.stop()
    produced, consumed = produced_out.result, consumed_out.result
    (work / "run.json").write_text(json.dumps({"port": port, "produced": produced,
                                               "consumed": consumed}))
    if args.capture_only:
        print(f"{args.broker} at {args.rate:,} records/s: bench latency ms "
              + ", ".join(f"{k} {consumed['latency_ms'][k]:.3g}" for k in ("p50", "p99", "p99.9"))
              + f"; analyse with --again {work}")
        return 0
    segments, counts = _segments(segments_path)
    summary = analyse(segments, consumed.get("outliers", []), port, _occupancy(work))
    summary.update(broker=args.broker, rate=args.rate, segments=len(segments), **counts,
                   producer_max_behind_ms=produced.get("max_behind_ms"),
                   bench_latency_ms=consumed["latency_ms"])
    print(f"{args.broker} at {args.rate:,} records/s: producer at worst "
          f"{produced['max_behind_ms']:.1f} ms behind schedule; {len(segments):,} segments "
          f"with data captured; {_counts(counts)}")
    _print(summary)
    if args.json is not None:
        args.json.write_text(json.dumps(summary, indent=1))
    print(f"work dir: {work}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
