"""``minikafka console-producer``: lines from standard input become records, like Kafka's
``kafka-console-producer.sh`` (same flags and ``--property`` names).

    minikafka console-producer --bootstrap-server H:P --topic T
        [--property parse.key=true --property key.separator=:] [--sync]
        [--compression-codec gzip|snappy|lz4|zstd|none] [--request-required-acks -1|0|1]
        [--producer-property k=v ...] [--producer.config FILE]

Each line (UTF-8, without its line break) is one record's value. ``parse.key`` splits the key
off at ``key.separator`` (tab), ``parse.headers`` the headers (``k:v,k:v``) at
``headers.delimiter`` (tab) first; ``null.marker`` makes a key, value or header value null;
a line without the separator is an error unless ``ignore.error=true``. Keyed records go to
``murmur2(key) % partitions`` (Kafka's partitioner); the others to one partition per batch
(sticky). Records are sent in batches of up to ``--batch-size`` bytes, or after
``--timeout`` ms (linger) with nothing more to read; ``--sync`` sends every line alone.
Producer properties by Kafka's names: ``acks``, ``compression.type``, ``linger.ms``,
``batch.size``, ``client.id``, ``request.timeout.ms``. A failed send is reported on stderr
(exit 1 at the end). Records are not idempotent (no producer id).
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import random
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import BinaryIO, Final, TextIO

from cli.common import key_values, read_properties
from client import ClientConfig, ClientError, KafkaClient, produce
from client.partitioner import partition_for_key
from protocol.compression import CompressionType
from protocol.errors import ErrorCode
from protocol.records import NewRecord, build_batch
from protocol.topic_partition import TopicPartition

QUEUE_LINES: Final = 10_000
MAX_LINE_BYTES: Final = 16 * 1024 * 1024
CODECS: Final = {c.name.lower(): c for c in CompressionType}


class InputError(ValueError):
    """A line the reader settings cannot parse."""


@dataclass(slots=True)
class LineReader:
    """Kafka's LineMessageReader settings (``--property``)."""

    parse_key: bool = False
    key_separator: str = "\t"
    parse_headers: bool = False
    headers_delimiter: str = "\t"
    headers_separator: str = ","
    headers_key_separator: str = ":"
    ignore_error: bool = False
    null_marker: str | None = None
    line_number: int = field(default=0)

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> LineReader:
        reader = cls(
            parse_key=props.get("parse.key", "false").strip().lower() == "true",
            key_separator=props.get("key.separator", "\t"),
            parse_headers=props.get("parse.headers", "false").strip().lower() == "true",
            headers_delimiter=props.get("headers.delimiter", "\t"),
            headers_separator=props.get("headers.separator", ","),
            headers_key_separator=props.get("headers.key.separator", ":"),
            ignore_error=props.get("ignore.error", "false").strip().lower() == "true",
            null_marker=props.get("null.marker"))
        seps = [("headers.delimiter", reader.headers_delimiter), ("headers.separator", reader.headers_separator),
                ("headers.key.separator", reader.headers_key_separator)]
        for i, (a, va) in enumerate(seps):
            for b, vb in seps[i + 1:]:
                if va == vb:
                    raise InputError(f"{a} and {b} may not be equal")
        if reader.null_marker is not None:
            for name, value in [("key.separator", reader.key_separator), *seps]:
                if value == reader.null_marker:
                    raise InputError(f"null.marker and {name} may not be equal")
        return reader

    def _cut(self, enabled: bool, line: str, start: int, sep: str, what: str) -> str | None:
        if not enabled:
            return None
        index = line.find(sep, start)
        if index == -1:
            if self.ignore_error:
                return None
            raise InputError(f"No {what} found on line number {self.line_number}: '{line}'")
        return line[start:index]

    def _bytes(self, text: str | None) -> bytes | None:
        return None if text is None or text == self.null_marker else text.encode()

    def record(self, line: str) -> NewRecord:
        self.line_number += 1
        headers_text = self._cut(self.parse_headers, line, 0, self.headers_delimiter, "headers delimiter")
        start = 0 if headers_text is None else len(headers_text) + len(self.headers_delimiter)
        key = self._cut(self.parse_key, line, start, self.key_separator, "key separator")
        value = line[start + (0 if key is None else len(key) + len(self.key_separator)):]
        headers: list[tuple[str, bytes | None]] = []
        if headers_text is not None and headers_text != self.null_marker:
            for pair in headers_text.split(self.headers_separator):
                k, sep, v = pair.partition(self.headers_key_separator)
                if not sep:
                    if not self.ignore_error:
                        raise InputError(f"No header key separator found in pair '{pair}' on line "
                                         f"number {self.line_number}")
                    headers.append((pair, None))
                    continue
                if k == self.null_marker:
                    raise InputError(f"Header keys should not be equal to the null marker '{k}' "
                                     "as they can't be null")
                headers.append((k, self._bytes(v)))
        return NewRecord(self._bytes(key), self._bytes(value), tuple(headers))


@dataclass(slots=True)
class Settings:
    topic: str
    acks: int
    compression: CompressionType
    batch_bytes: int
    linger_ms: int
    sync: bool
    ack_timeout_ms: int


class Batcher:
    """Records per partition, sent when a batch is full, lingering or at the end."""

    def __init__(self, client: KafkaClient, settings: Settings, partitions: int, err: TextIO) -> None:
        self.client = client
        self.s = settings
        self.partitions = partitions
        self.err = err
        self.pending: dict[int, list[NewRecord]] = {}
        self.pending_bytes = 0
        self.sticky = random.randrange(partitions)
        self.failed = 0

    def add(self, record: NewRecord) -> None:
        if record.key is not None:
            partition = partition_for_key(record.key, self.partitions)
        else:
            partition = self.sticky
        self.pending.setdefault(partition, []).append(record)
        self.pending_bytes += len(record.key or b"") + len(record.value or b"") + 16

    @property
    def full(self) -> bool:
        return self.s.sync or self.pending_bytes >= self.s.batch_bytes

    async def flush(self) -> None:
        batches, self.pending, self.pending_bytes = self.pending, {}, 0
        self.sticky = random.randrange(self.partitions)
        for partition, records in batches.items():
            tp = TopicPartition(self.s.topic, partition)
            try:
                data = build_batch(records, compression=self.s.compression)
                await produce(self.client, tp, data, acks=self.s.acks, timeout_ms=self.s.ack_timeout_ms)
            except (ClientError, ValueError) as exc:
                self.failed += len(records)
                name = getattr(exc, "error_name", type(exc).__name__)
                print(f"ERROR Error when sending {len(records)} message(s) to topic {self.s.topic} "
                      f"partition {partition} with error: {name}: {exc}", file=self.err)


def _read_lines(source: BinaryIO, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[str | None]) -> None:
    """Feed ``queue`` from ``source`` (a thread: reading stdin blocks), then None; ends quietly
    when the loop has gone (the producer stopped on an error)."""

    def put(line: str | None) -> None:
        future = asyncio.run_coroutine_threadsafe(queue.put(line), loop)
        future.result()

    try:
        for raw in iter(lambda: source.readline(MAX_LINE_BYTES), b""):
            put(raw.decode("utf-8", errors="replace").rstrip("\n").removesuffix("\r"))
        put(None)
    except (RuntimeError, concurrent.futures.CancelledError):
        return


async def _partition_count(client: KafkaClient, topic: str) -> int:
    """The topic's partitions; asks the broker to create it (as Kafka's producer does, when the
    broker has auto.create.topics.enable) and waits for its leaders."""
    async def attempt() -> int:
        meta = await client.refresh_metadata([topic], allow_auto_topic_creation=True)
        info = meta.topics.get(topic)
        if info is None or info.error_code or not info.partitions:
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if info is None or not info.error_code else info.error_code
            raise ClientError.from_code(code, None, f"Topic {topic}")
        return len(info.partitions)

    return await client.retry(attempt, what=f"Metadata of {topic}", timeout_ms=client.config.request_timeout_ms)


async def run(bootstrap: str, config: ClientConfig, settings: Settings, reader: LineReader,
              source: BinaryIO, err: TextIO) -> int:
    async with KafkaClient(bootstrap, config) as client:
        partitions = await _partition_count(client, settings.topic)
        batcher = Batcher(client, settings, partitions, err)
        queue: asyncio.Queue[str | None] = asyncio.Queue(QUEUE_LINES)
        thread = threading.Thread(target=_read_lines, args=(source, asyncio.get_running_loop(), queue),
                                  daemon=True, name="console-producer-stdin")
        thread.start()
        while True:
            try:
                if batcher.pending:
                    line = await asyncio.wait_for(queue.get(), settings.linger_ms / 1000)
                else:
                    line = await queue.get()
            except TimeoutError:
                await batcher.flush()
                continue
            if line is None:
                break
            batcher.add(reader.record(line))
            if batcher.full:
                await batcher.flush()
        await batcher.flush()
    return 1 if batcher.failed else 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="minikafka console-producer",
                                description="Read lines from standard input and produce them as records.")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--bootstrap-server", metavar="HOST1:PORT1,...", help="REQUIRED: the broker(s) to connect to")
    target.add_argument("--broker-list", dest="bootstrap_server", help="DEPRECATED: same as --bootstrap-server")
    p.add_argument("--topic", required=True, help="REQUIRED: the topic to produce to")
    p.add_argument("--sync", action="store_true", help="send each line alone, waiting for its answer")
    p.add_argument("--compression-codec", nargs="?", const="gzip", default=None,
                   choices=sorted(CODECS), help="compress batches with this codec (gzip when given alone)")
    p.add_argument("--batch-size", type=int, default=16 * 1024,
                   help="bytes of records gathered before a send (default 16384)")
    p.add_argument("--timeout", type=int, default=1000,
                   help="ms to wait for more lines before sending what is gathered (default 1000)")
    p.add_argument("--request-required-acks", default=None,
                   help="acks of the produce requests: -1 (all, default), 0 or 1")
    p.add_argument("--request-timeout-ms", type=int, default=1500,
                   help="how long the broker may wait for the acks, in ms (default 1500)")
    p.add_argument("--property", action="append", default=[], metavar="KEY=VALUE",
                   help="reader settings: parse.key, key.separator, parse.headers, headers.delimiter, "
                        "headers.separator, headers.key.separator, ignore.error, null.marker")
    p.add_argument("--reader-config", metavar="FILE", help="a properties file of reader settings")
    p.add_argument("--producer-property", action="append", default=[], metavar="KEY=VALUE",
                   help="a producer setting (acks, compression.type, linger.ms, batch.size, client.id, ...)")
    p.add_argument("--producer.config", dest="producer_config", metavar="FILE",
                   help="a properties file of producer settings (--producer-property wins)")
    p.add_argument("--command-config", dest="command_config", metavar="FILE",
                   help="the same as --producer.config")
    return p


def settings_from(args: argparse.Namespace) -> tuple[ClientConfig, Settings, LineReader]:
    props = read_properties(args.producer_config or args.command_config)
    props.update(key_values(args.producer_property, "producer property"))
    acks_text = args.request_required_acks or props.pop("acks", "-1")
    acks = {"all": -1, "-1": -1, "0": 0, "1": 1}.get(acks_text.strip().lower())
    if acks is None:
        raise InputError(f"Invalid value {acks_text} for configuration acks: String must be one of: all, -1, 0, 1")
    codec_name = args.compression_codec or props.pop("compression.type", "none").strip().lower()
    if codec_name not in CODECS:
        raise InputError(f"Invalid value {codec_name} for configuration compression.type")
    batch_bytes = int(props.pop("batch.size", args.batch_size))
    linger_ms = int(props.pop("linger.ms", args.timeout))
    config = ClientConfig.from_properties(props, ClientConfig(client_id="console-producer"))
    settings = Settings(args.topic, acks, CODECS[codec_name], max(batch_bytes, 1), max(linger_ms, 0),
                        args.sync, args.request_timeout_ms)
    reader_props = read_properties(args.reader_config)
    reader_props.update(key_values(args.property, "property"))
    return config, settings, LineReader.from_properties(reader_props)


def main(argv: Sequence[str] | None = None, source: BinaryIO | None = None, err: TextIO | None = None) -> int:
    args = _parser().parse_args(list(argv) if argv is not None else None)
    errors = err if err is not None else sys.stderr
    try:
        config, settings, reader = settings_from(args)
        return asyncio.run(run(args.bootstrap_server, config, settings, reader,
                               source if source is not None else sys.stdin.buffer, errors))
    except (ValueError, ClientError) as exc:  # InputError, or a setting that is not a number
        print(f"ERROR {exc}", file=errors)
        return 1


if __name__ == "__main__":
    sys.exit(main())
