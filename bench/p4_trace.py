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
- ``produce in``: the first segment to the broker that carries it (the Produce request
  leaving the producer's librdkafka thread);
- ``answer out``: the first segment from the broker that carries it (the Fetch answer);
- ``received``: the consumer's Python loop got it from ``poll()`` (the consumer reports
  each sample's receive time: ``outliers_ms``).

and the consumer's Fetch request that was answered with it (the last segment the consumer's
connection sent before that answer). The record's latency is split into:

- ``producer``: produce in - sent (librdkafka's queue, its thread's wake-up, the write);
- ``broker``: answer out - max(produce in, fetch request in): from the moment the broker
  had both the record and the fetch that returned it to that fetch's answer;
- ``no fetch waiting``: max(0, fetch request in - produce in): the record had reached the
  broker but the fetch that returned it had not been sent yet. Either the consumer had no
  fetch out (its previous answer still travelling, its thread busy or waiting for a core),
  or its fetches meanwhile were answered without this record: the broker had not appended
  it yet (Produce requests queued before it on the producer's connection), or the
  consumer was behind. The segments alone do not tell these apart; the Produce answers
  (one per request, in order) say when each request was appended;
- ``consumer``: received - answer out (librdkafka's thread reading and parsing the answer,
  its queue, the Python ``poll()``).

Reported: percentiles of each part over all records, and for the records at or above the
latency's p99 and p99.9 the mean of each part (what the tail is made of). The capture costs
CPU (a Python process receiving every segment; parsed after the load stops), so on this
2-core machine it moves the latencies themselves: compare parts and brokers within one
run, not with a bench run. ``--again WORK_DIR`` analyses a run's saved capture again.
"""

from __future__ import annotations

import argparse
import bisect
import ctypes
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
from typing import Any, Final

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
PARTS: Final[tuple[str, ...]] = ("producer", "no fetch waiting", "broker", "consumer")


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
    rows: list[tuple[int, int, int, int, list[int]]] = []
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
    for data, anc in raw:
        ts = 0
        for level, kind, cdata in anc:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                sec, nsec = _TIMESPEC.unpack_from(cdata)
                ts = sec * 1_000_000_000 + nsec - offset
        tcp = 14 + (data[14] & 0x0F) * 4
        sport, dport = struct.unpack_from(">HH", data, tcp)
        payload = data[tcp + (data[tcp + 12] >> 4) * 4:]
        if not payload:
            continue
        stamps = []
        for m in finditer(payload):
            (value,) = unpack(m.group(1))
            if lo <= value <= hi:
                stamps.append(value)
        rows.append((ts, sport, dport, len(payload), stamps))
    # Segments the socket dropped (its buffer full: the capture fell behind), since it opened.
    _packets, drops = struct.unpack("II", sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8))
    with out.open("w") as f:
        f.write(json.dumps({"dropped": drops}) + "\n")
        for row in rows:
            f.write(json.dumps(row) + "\n")
    return 0


def _segments(path: Path) -> tuple[list[list[Any]], int]:
    """The capture's segments, and how many the socket dropped."""
    lines = path.read_text().splitlines()
    head: dict[str, int] = json.loads(lines[0]) if lines else {"dropped": 0}
    return [json.loads(line) for line in lines[1:]], head["dropped"]


def _pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def analyse(segments: list[list[Any]], samples: list[list[float]], broker_port: int
            ) -> dict[str, Any]:
    """Each sampled record's parts (see the module docstring) and their summaries."""
    produce_in: dict[int, int] = {}
    answer_out: dict[int, tuple[int, int]] = {}  # stamp -> (time, consumer port)
    consumer_ports: set[int] = set()
    for ts, sport, dport, _n, stamps in segments:
        if sport == broker_port and stamps:
            consumer_ports.add(dport)
            for s in stamps:
                answer_out.setdefault(s, (ts, dport))
        elif dport == broker_port and stamps:
            for s in stamps:
                produce_in.setdefault(s, ts)
    # The consumer's requests, in time order, per connection: the fetch answered by a
    # segment is the last request its connection sent before it.
    requests: dict[int, list[int]] = {}
    for ts, sport, dport, _n, stamps in segments:
        if dport == broker_port and sport in consumer_ports and not stamps:
            requests.setdefault(sport, []).append(ts)


    rows: list[dict[str, float]] = []
    missing = 0
    for received_s, latency_ms in samples:
        received = round(received_s * 1e9)
        sent = received - round(latency_ms * 1e6)
        # the stamp is exact in ns; the float round trip is within a microsecond
        stamp = next((s for s in (sent, sent - 1, sent + 1) if s in produce_in), None)
        if stamp is None:
            candidates = [s for s in range(sent - 2000, sent + 2001) if s in answer_out]
            stamp = candidates[0] if len(candidates) == 1 else None
        if stamp is None or stamp not in produce_in or stamp not in answer_out:
            missing += 1
            continue
        p_in = produce_in[stamp]
        a_out, cport = answer_out[stamp]
        reqs = requests.get(cport, [])
        i = bisect.bisect_left(reqs, a_out)
        f_in = reqs[i - 1] if i > 0 else p_in
        start = max(p_in, f_in)
        rows.append({
            "latency": latency_ms,
            "producer": (p_in - stamp) / 1e6,
            "no fetch waiting": max(0, f_in - p_in) / 1e6,
            "broker": (a_out - start) / 1e6,
            "consumer": (received - a_out) / 1e6,
            "parked": 1.0 if f_in <= p_in else 0.0,
        })
    summary: dict[str, Any] = {"records": len(samples), "matched": len(rows), "missing": missing}
    if not rows:
        return summary
    lat = [r["latency"] for r in rows]
    summary["latency"] = {f"p{p:g}": _pct(lat, p) for p in (50, 90, 99, 99.9)}
    summary["parts"] = {
        part: {f"p{p:g}": _pct([r[part] for r in rows], p) for p in (50, 90, 99, 99.9)}
        for part in PARTS}
    # The broker's part by how the fetch met the record: parked before the record came (woken
    # by its append) or sent after it (answered at once).
    for name, parked in (("broker, parked fetch woken", 1.0), ("broker, fetch answered at once", 0.0)):
        part = [r["broker"] for r in rows if r["parked"] == parked]
        summary["parts"][name] = {"records": float(len(part)),
                                  **{f"p{p:g}": _pct(part, p) for p in (50, 90, 99, 99.9)}}
    tails: dict[str, Any] = {}
    for p in (50.0, 99.0, 99.9):
        bound = _pct(lat, p)
        tail = [r for r in rows if r["latency"] >= bound] if p > 50 else rows
        tails[f">= p{p:g}" if p > 50 else "all"] = {
            "records": len(tail),
            "mean latency": statistics.fmean(r["latency"] for r in tail),
            "parked": sum(1 for r in tail if r["parked"]),
            **{part: statistics.fmean(r[part] for r in tail) for part in PARTS},
            # which part was the largest, per record
            "largest": {part: sum(1 for r in tail if max(PARTS, key=r.__getitem__) == part)
                        for part in PARTS},
        }
    summary["tails"] = tails
    return summary


def _print(summary: dict[str, Any]) -> None:
    print(f"records sampled {summary['records']:,}, matched with their segments "
          f"{summary['matched']:,}")
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
              + "; largest: " + ", ".join(f"{part} {n}" for part, n in t["largest"].items()))


def main(argv: list[str] | None = None) -> int:
    args_in = sys.argv[1:] if argv is None else argv
    if args_in[:1] == ["--sniff"]:
        return sniff(int(args_in[1]), Path(args_in[2]), int(args_in[3]), int(args_in[4]))
    from bench.admin import create_topic
    from bench.brokers import BrokerUnderTest
    from bench.kafka_broker import ApacheKafka
    from bench.load_procs import start_latency_pair
    from bench.load_specs import latency_specs
    from bench.minikafka_broker import MiniKafka
    from bench.procs import BenchError, spawn_ready, stop

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--broker", choices=("minikafka", "kafka"), default="minikafka")
    parser.add_argument("--rate", type=int, default=10_000, help="records/s")
    parser.add_argument("--warmup-s", type=float, default=3.0)
    parser.add_argument("--window-s", type=float, default=10.0)
    parser.add_argument("--out-dir", type=Path, default=Path(tempfile.gettempdir()) / "p4-trace")
    parser.add_argument("--json", type=Path, default=None, help="also write the summary here")
    parser.add_argument("--again", type=Path, default=None, metavar="WORK_DIR",
                        help="analyse a run's work dir again (no load)")
    args = parser.parse_args(args_in)
    if args.again is not None:
        run = json.loads((args.again / "run.json").read_text())
        segments, dropped = _segments(args.again / "segments.jsonl")
        summary = analyse(segments, run["consumed"].get("outliers", []), run["port"])
        print(f"{len(segments):,} segments with data captured, {dropped:,} dropped")
        _print(summary)
        return 0
    args.out_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"{args.broker}-{args.rate}-", dir=args.out_dir))
    broker: BrokerUnderTest = (MiniKafka(work / "broker") if args.broker == "minikafka"
                               else ApacheKafka(work / "broker"))
    broker.start()
    sniffer = None
    try:
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
        with start_latency_pair(consume, produce, name="P4", log_dir=work) as pair:
            produced_out, consumed_out = pair.results(produce_timeout_s=records / args.rate + 120)
        stop(sniffer, grace_s=120)
    except BenchError as exc:
        print(f"load failed: {exc}", file=sys.stderr)
        return 1
    finally:
        if sniffer is not None:
            stop(sniffer, grace_s=120)
        broker.stop()
    produced, consumed = produced_out.result, consumed_out.result
    (work / "run.json").write_text(json.dumps({"port": port, "produced": produced,
                                               "consumed": consumed}))
    segments, dropped = _segments(segments_path)
    summary = analyse(segments, consumed.get("outliers", []), port)
    summary.update(broker=args.broker, rate=args.rate, segments=len(segments), dropped=dropped,
                   producer_max_behind_ms=produced.get("max_behind_ms"),
                   bench_latency_ms=consumed["latency_ms"])
    print(f"{args.broker} at {args.rate:,} records/s: producer at worst "
          f"{produced['max_behind_ms']:.1f} ms behind schedule; {len(segments):,} segments "
          f"with data captured, {dropped:,} dropped by the capture")
    _print(summary)
    if args.json is not None:
        args.json.write_text(json.dumps(summary, indent=1))
    print(f"work dir: {work}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
