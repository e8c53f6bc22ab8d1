"""User-space instructions per request, counted by valgrind: independent of the machine's load.

``python -m bench.instructions --requests produce,fetch``

The broker (``python -m cli broker``, the bench's settings) runs under valgrind's callgrind
and serves, from one client on one connection, a warm-up of ``WARMUP`` requests of a kind,
then rounds of ``--short`` and ``--long`` sequential requests of it. Around each batch the
broker's instruction counter is read (``callgrind_control -e Ir``: valgrind reads it
without the broker's help), so ``(long batch - short batch) / (long - short)`` is the cost
of one request: what a batch costs besides its requests (the reads, timers firing) is the
same in both and cancels. Rounds repeat (``--rounds``) to show the spread: a few hundred to
a few thousand instructions, from timers and the interpreter's garbage collection.

Requests, each to one partition of one topic on one connection, like P5's:

- ``produce``: acks=1, one record of ``--record-bytes`` (no key) per request;
- ``produce-16c``: the same request on each of ``CONNECTIONS`` connections at once, then
  their answers read (P5's shape: 16 producers, one request in flight each; the broker
  under valgrind reads most of them in one turn of its loop); per request;
- ``produce-pipe``: ``PIPELINE`` of the same request on one connection, sent in one write
  before any answer is read, then their answers read in order (P4's backlog: a producer's
  requests queued on its one connection after a stall); per request;
- ``produce-p1``: P1's request (librdkafka, linger 5 ms, 1 MiB batches, no compression,
  acks=1): one batch of ``P1_RECORDS`` records of ``--record-bytes`` (no key), ~450 KB
  with 100-byte records, the size librdkafka's batches averaged in a P1-like run here;
- ``produce-p1-8p``: the same records spread over ``P1_PARTITIONS`` partitions of a
  second topic, one batch each (P1 with 8 partitions: several batches a request, the
  general produce path);
- ``fetch``: a consumer fetch (max_wait_ms 0) of the ``FETCH_RECORDS`` records produced
  first, always from offset 0 (the same bytes every time);
- ``fetch-p2l``: P2L's fetch (``bench.fetch_drain``'s request, Fetch v12): from offset 0 of
  a topic of its own holding ``P2L_BATCHES`` batches of ``P2L_BATCH_RECORDS`` records of 64
  KiB (librdkafka's 1 MiB batches of P2L, 983 KB each), ``max.partition.fetch.bytes`` 1
  MiB: answered with the first batch whole (sendfile), as every P2L fetch is;
- ``fetch-tail``: the same from the offset of the last record: a consumer at the log's tail
  (P4's), answered with the newest batch;
- ``fetch-wait``: a consumer's long poll at the log end (max_wait_ms 10,000), parked in the
  purgatory and woken by a produce of one record from another connection (sent
  ``WAIT_PARK_S`` after the fetch, so that the broker has parked it): each request is the
  produce and the parked fetch, so the fetch alone costs this less ``produce``;
- ``metadata``: Metadata for the one topic;
- ``metadata-all``: Metadata for every topic (what P7 asks; with ``--partitions`` the
  topic has that many partitions).

The broker is stopped with SIGTERM at the end; callgrind's per-function profile of the
whole run is left in ``--out-dir`` (``callgrind_annotate``). With ``--profile``, one more
batch of ``--long`` requests of each kind is profiled alone (counters zeroed before it,
dumped after it: ``callgrind.<tag>.<pid>.<n>``), so that profile holds the request path
only, not the start-up.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Final

from bench.brokers import SHARED_SETTINGS
from bench.procs import free_port, spawn, stop, wait_for_port
from bench.sockets import recv_exact
from client.sync import SyncClient
from protocol.frames import RequestHeader, decode_response, encode_request
from protocol.messages.fetch import FetchRequest, FetchResponse
from protocol.messages.metadata import MetadataRequest
from protocol.messages.produce import ProduceRequest, ProduceResponse
from protocol.records import NewRecord, build_batch
from protocol.topic_partition import TopicPartition

WARMUP: Final[int] = 50
FETCH_RECORDS: Final[int] = 10
P1_RECORDS: Final[int] = 4096
P1_PARTITIONS: Final[int] = 8
TOPIC: Final[str] = "instructions"
TOPIC_8P: Final[str] = "instructions-8p"
TOPIC_P2L: Final[str] = "instructions-p2l"
P2L_BATCHES: Final[int] = 12  # more than the newest heads a segment keeps (RECENT_HEADS)
P2L_BATCH_RECORDS: Final[int] = 15
P2L_RECORD_BYTES: Final[int] = 64 << 10
P2L_FETCH_VERSION: Final[int] = 12  # bench.fetch_drain's
P1_KINDS: Final[tuple[str, ...]] = ("produce-p1", "produce-p1-8p")
START_TIMEOUT_S: Final[float] = 600.0  # the interpreter's start-up is ~50x slower under valgrind
STOP_TIMEOUT_S: Final[float] = 300.0
CONNECTIONS: Final[int] = 16  # produce-16c
PIPELINE: Final[int] = 16  # produce-pipe
KINDS: Final[tuple[str, ...]] = ("produce", "produce-16c", "produce-pipe", "produce-p1", "produce-p1-8p", "fetch",
                                  "fetch-p2l", "fetch-tail", "fetch-wait", "metadata",
                                  "metadata-all")
WAIT_PARK_S: Final[float] = 0.05  # the broker under valgrind reads a request in ~10-20 ms


def _produce_request(value: bytes, records: int = 1, partitions: int = 1,
                     topic: str = TOPIC) -> ProduceRequest:
    """acks=1, ``records`` records of ``value`` (no key) spread over partitions
    0..``partitions``-1, one batch each."""
    each = records // partitions
    return ProduceRequest(
        transactional_id=None, acks=1, timeout_ms=30_000,
        topic_data=[ProduceRequest.TopicProduceData(topic, [
            ProduceRequest.PartitionProduceData(
                p, build_batch([NewRecord(None, value, (), None)] * each))
            for p in range(partitions)])],
    )


def _check_produce(response: object) -> None:
    """The produce measured is appended, not refused."""
    assert isinstance(response, ProduceResponse)
    errors = [p.error_code for t in response.responses for p in t.partition_responses]
    if any(errors):
        raise RuntimeError(f"produce answered errors {errors}")


def request_bytes(request: ProduceRequest) -> int:
    """The records' bytes in a produce request (what P1 counts as produced)."""
    return sum(len(p.records) for t in request.topic_data for p in t.partition_data
               if isinstance(p.records, bytes | bytearray | memoryview))


def _fetch_request(topic_id: uuid.UUID, offset: int = 0, max_wait_ms: int = 0,
                   topic: str = TOPIC) -> FetchRequest:
    """Fetch v13+ names the topic by id (the name is not sent), older versions by name."""
    return FetchRequest(
        replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=50 << 20, isolation_level=0,
        session_id=0, session_epoch=-1,
        topics=[FetchRequest.FetchTopic(topic=topic, topic_id=topic_id, partitions=[
            FetchRequest.FetchPartition(partition=0, fetch_offset=offset,
                                        partition_max_bytes=1 << 20)])],
    )


def _check_fetch(response: object, records: int) -> None:
    """The fetch measured is answered with records, not with an error."""
    assert isinstance(response, FetchResponse)
    part = response.responses[0].partitions[0]
    if response.error_code or part.error_code or not part.records:
        raise RuntimeError(f"fetch answered error {response.error_code}/{part.error_code} "
                           f"with {records} records expected")


class _ParkedFetches:
    """``fetch-wait``: a fetch at the log end on a raw socket of its own, woken by a produce
    sent on the client's connection once the broker has had time to park it."""

    def __init__(self, port: int, client: SyncClient, produce: ProduceRequest,
                 produce_version: int, topic_id: uuid.UUID, fetch_version: int) -> None:
        self._sock = socket.create_connection(("127.0.0.1", port), timeout=120)
        self._client = client
        self._produce = produce
        self._produce_version = produce_version
        self._topic_id = topic_id
        self._fetch_version = fetch_version
        self._end = -1
        self._correlation = 0

    def __call__(self) -> None:
        if self._end < 0:  # the log end, once (other kinds may have produced)
            found = self._client.list_offsets({TopicPartition(TOPIC, 0): -1})
            self._end = found[TopicPartition(TOPIC, 0)].offset
        request = _fetch_request(self._topic_id, self._end, max_wait_ms=10_000)
        self._correlation += 1
        self._sock.sendall(encode_request(RequestHeader(
            1, self._fetch_version, self._correlation, "instructions"), request))
        time.sleep(WAIT_PARK_S)
        self._client.send(self._produce, self._produce_version)
        self._end += 1
        size = struct.unpack(">i", recv_exact(self._sock, 4))[0]
        response = recv_exact(self._sock, size)
        if len(response) < 60:  # an empty answer: the produce did not wake it
            raise RuntimeError(f"fetch-wait answered {len(response)} bytes, no record")

    def close(self) -> None:
        self._sock.close()


class _ConcurrentProduces:
    """``produce-16c``: one produce on each of ``CONNECTIONS`` raw sockets, all sent before
    any answer is read; every answer is checked (no error)."""

    def __init__(self, port: int, produce: ProduceRequest, version: int) -> None:
        self._socks = [socket.create_connection(("127.0.0.1", port), timeout=120)
                       for _ in range(CONNECTIONS)]
        self._frame = encode_request(RequestHeader(0, version, 1, "instructions"), produce)
        self._version = version

    def __call__(self) -> None:
        for sock in self._socks:
            sock.sendall(self._frame)
        for sock in self._socks:
            size = struct.unpack(">i", recv_exact(sock, 4))[0]
            _check_produce(decode_response(recv_exact(sock, size), ProduceRequest.API_KEY,
                                           self._version)[1])

    def close(self) -> None:
        for sock in self._socks:
            sock.close()


class _PipelinedProduces:
    """``produce-pipe``: ``PIPELINE`` produce requests sent in one write on one raw socket,
    then their answers read; each answer is checked (no error, its own correlation id, in
    order)."""

    def __init__(self, port: int, produce: ProduceRequest, version: int) -> None:
        self._sock = socket.create_connection(("127.0.0.1", port), timeout=120)
        self._frames = b"".join(
            encode_request(RequestHeader(0, version, cid, "instructions"), produce)
            for cid in range(PIPELINE))
        self._version = version

    def __call__(self) -> None:
        self._sock.sendall(self._frames)
        for cid in range(PIPELINE):
            size = struct.unpack(">i", recv_exact(self._sock, 4))[0]
            answered, response = decode_response(recv_exact(self._sock, size),
                                                 ProduceRequest.API_KEY, self._version)
            if answered != cid:
                raise RuntimeError(f"produce-pipe: answer {answered} where {cid} was due")
            _check_produce(response)

    def close(self) -> None:
        self._sock.close()


def _metadata_request() -> MetadataRequest:
    return MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)],
                           allow_auto_topic_creation=False)


def instructions(pid: int) -> int:
    """The instructions valgrind has counted so far in ``pid`` (every thread)."""
    out = subprocess.run(["callgrind_control", "-e", "Ir", str(pid)], capture_output=True,
                         text=True, timeout=60, check=True).stdout
    counts = re.findall(r"^\s*Th\s+\d+\s+([\d,]+)\s*$", out, re.MULTILINE)
    if not counts:
        raise RuntimeError(f"no instruction count from callgrind_control: {out!r}")
    return sum(int(c.replace(",", "")) for c in counts)


def callgrind_control(pid: int, *args: str) -> None:
    subprocess.run(["callgrind_control", *args, str(pid)], capture_output=True, timeout=120,
                   check=True)


def measure(kinds: list[str], *, short: int, long: int, rounds: int, out_dir: Path,
            record_bytes: int, version: int | None, tag: str,
            tree: Path | None = None, profile: bool = False,
            partitions: int = 1) -> dict[str, list[float]]:
    """Instructions per request of each kind, one figure per round; the broker runs from
    ``tree`` (a checkout, e.g. a ``git worktree`` of another commit; default: this one)."""
    work = Path(tempfile.mkdtemp(prefix="instructions-", dir=out_dir))
    port = free_port()
    props = {"listeners": f"PLAINTEXT://127.0.0.1:{port}", "log.dirs": str(work / "data"),
             **SHARED_SETTINGS}
    argv = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_dir}/callgrind.{tag}.%p",
            "--trace-children=no", sys.executable, "-m", "cli", "broker",
            *(a for k, v in props.items() for a in ("--override", f"{k}={v}"))]
    proc = spawn(argv, log_path=work / "broker.log", env={**os.environ, "PYTHONHASHSEED": "0"},
                 cwd=tree)
    figures: dict[str, list[float]] = {kind: [] for kind in kinds}
    try:
        wait_for_port(port, proc=proc, timeout_s=START_TIMEOUT_S)
        with SyncClient(f"127.0.0.1:{port}", timeout_ms=120_000) as client:
            client.create_topic(TOPIC, partitions, 1, {})
            value = os.urandom(record_bytes)
            produce = _produce_request(value)
            p1 = _produce_request(value, P1_RECORDS)
            p1_8p = _produce_request(value, P1_RECORDS, P1_PARTITIONS, TOPIC_8P)
            if "produce-p1-8p" in kinds:
                client.create_topic(TOPIC_8P, P1_PARTITIONS, 1, {})
            pv = client.version_for(ProduceRequest) if version is None else version
            for _ in range(FETCH_RECORDS):
                client.send(produce, pv)
            fv = client.version_for(FetchRequest)
            mv = client.version_for(MetadataRequest)
            (meta,) = client.describe_topics([TOPIC])
            fetch_all, fetch_tail = (_fetch_request(meta.topic_id, offset)
                                     for offset in (0, FETCH_RECORDS - 1))
            _check_fetch(client.send(fetch_all, fv), FETCH_RECORDS)
            _check_fetch(client.send(fetch_tail, fv), 1)
            for kind, big in (("produce-p1", p1), ("produce-p1-8p", p1_8p)):
                if kind in kinds:
                    _check_produce(client.send(big, pv))
                    print(f"{kind}: {request_bytes(big):,} bytes of records a request",
                          flush=True)
            fetch_p2l = _fetch_request(uuid.UUID(int=0), topic=TOPIC_P2L)
            if "fetch-p2l" in kinds:
                client.create_topic(TOPIC_P2L, 1, 1, {})
                p2l_batch = _produce_request(os.urandom(P2L_RECORD_BYTES), P2L_BATCH_RECORDS,
                                             topic=TOPIC_P2L)
                for _ in range(P2L_BATCHES):
                    _check_produce(client.send(p2l_batch, pv))
                _check_fetch(client.send(fetch_p2l, P2L_FETCH_VERSION), P2L_BATCH_RECORDS)
            parked = _ParkedFetches(port, client, produce, pv, meta.topic_id, fv)
            concurrent = _ConcurrentProduces(port, produce, pv)
            pipelined = _PipelinedProduces(port, produce, pv)
            sends: dict[str, Callable[[], object]] = {
                "produce": lambda: client.send(produce, pv),
                "produce-16c": concurrent,
                "produce-pipe": pipelined,
                "produce-p1": lambda: client.send(p1, pv),
                "produce-p1-8p": lambda: client.send(p1_8p, pv),
                "fetch": lambda: client.send(fetch_all, fv),
                "fetch-p2l": lambda: client.send(fetch_p2l, P2L_FETCH_VERSION),
                "fetch-tail": lambda: client.send(fetch_tail, fv),
                "fetch-wait": parked,
                "metadata": lambda: client.send(_metadata_request(), mv),
                "metadata-all": lambda: client.send(
                    MetadataRequest(topics=None, allow_auto_topic_creation=False), mv),
            }
            for kind in kinds:
                send = sends[kind]
                for _ in range(WARMUP):
                    send()
                for _ in range(rounds):
                    counts = [instructions(proc.pid)]
                    for n in (short, long):
                        for _ in range(n):
                            send()
                        counts.append(instructions(proc.pid))
                    each = ((counts[2] - counts[1]) - (counts[1] - counts[0])) / (long - short)
                    if kind == "produce-16c":  # each send is CONNECTIONS requests
                        each /= CONNECTIONS
                    elif kind == "produce-pipe":  # and PIPELINE requests
                        each /= PIPELINE
                    figures[kind].append(each)
                    print(f"{kind}: {each:,.0f} instructions per request", flush=True)
                if profile:
                    callgrind_control(proc.pid, "--zero")
                    for _ in range(long):
                        send()
                    callgrind_control(proc.pid, f"--dump={kind} x{long}")
    finally:
        stop(proc, grace_s=STOP_TIMEOUT_S, sig=signal.SIGTERM)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--requests", default="produce",
                        help=f"comma-separated, of {', '.join(KINDS)}")
    parser.add_argument("--short", type=int, default=200)
    parser.add_argument("--long", type=int, default=1200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--record-bytes", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=1,
                        help="partitions of the topic (1 to 10,000)")
    parser.add_argument("--produce-version", type=int, default=None,
                        help="default: the highest both sides support")
    parser.add_argument("--out-dir", type=Path,
                        default=Path(tempfile.gettempdir()) / "instructions")
    parser.add_argument("--tag", default=time.strftime("%Y%m%d-%H%M%S"))
    parser.add_argument("--tree", type=Path, default=None,
                        help="run the broker from this checkout (default: this one)")
    parser.add_argument("--profile", action="store_true",
                        help="also dump a profile of one --long batch of each kind alone")
    args = parser.parse_args(argv)
    kinds = args.requests.split(",")
    if unknown := set(kinds) - set(KINDS):
        parser.error(f"unknown request kinds {sorted(unknown)}")
    if not 1 <= args.partitions <= 10_000:
        parser.error("--partitions: 1 to 10,000")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    figures = measure(kinds, short=args.short, long=args.long, rounds=args.rounds,
                      out_dir=args.out_dir, record_bytes=args.record_bytes,
                      version=args.produce_version, tag=args.tag, tree=args.tree,
                      profile=args.profile, partitions=args.partitions)
    for kind, each in figures.items():
        print(f"{kind}: median {statistics.median(each):,.0f} "
              f"[{min(each):,.0f}-{max(each):,.0f}] instructions per request, "
              f"{len(each)} rounds of {args.long} - {args.short}")
        if kind in P1_KINDS:
            mb = request_bytes(_produce_request(bytes(args.record_bytes), P1_RECORDS)) / 1e6
            print(f"{kind}: median {statistics.median(each) / mb:,.0f} instructions per MB "
                  f"({mb:.3f} MB of records a request)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
