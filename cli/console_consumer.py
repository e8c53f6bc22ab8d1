"""``minikafka console-consumer``: records to standard output, like Kafka's
``kafka-console-consumer.sh`` (same flags and formatter properties).

    minikafka console-consumer --bootstrap-server H:P (--topic T | --include REGEX)
        [--from-beginning] [--partition N [--offset earliest|latest|N]]
        [--max-messages N] [--timeout-ms MS] [--isolation-level read_committed]
        [--property print.key=true --property print.offset=true ...]

Reads every partition of the topic(s) (or the one ``--partition``) from the latest offset,
the earliest with ``--from-beginning``, or ``--offset``; each record is printed as Kafka's
DefaultMessageFormatter does: optional ``CreateTime:ts``, ``Partition:p``, ``Offset:o``,
headers (``k:v,k:v`` or ``NO_HEADERS``) and key, separated by ``key.separator`` (tab), then
the value and ``line.separator``; a null key or value prints ``null.literal`` ("null").
Stops after ``--max-messages``, after ``--timeout-ms`` without a record, or on Ctrl-C, and
prints ``Processed a total of N messages`` on stderr. Fetches go to each leader with an
incremental fetch session. It reads without joining a consumer group: ``--group`` is
refused (no group membership in this tool).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import BinaryIO, Final, TextIO

from cli.common import key_values, read_properties
from cli.topics import topic_filter
from client import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    Admin,
    ClientConfig,
    ClientError,
    FetchPosition,
    FetchSession,
    KafkaClient,
    list_offsets,
    response_partitions,
)
from protocol.errors import ErrorCode, ProtocolError
from protocol.messages.fetch import FetchRequest
from protocol.records import StopReason, TimestampType, scan_batches
from protocol.topic_partition import TopicPartition

MAX_PARTITION_BYTES: Final = 1 << 20
POLL_WAIT_MS: Final = 500


@dataclass(slots=True)
class Formatter:
    """Kafka's DefaultMessageFormatter settings (``--property``)."""

    print_timestamp: bool = False
    print_key: bool = False
    print_value: bool = True
    print_partition: bool = False
    print_offset: bool = False
    print_headers: bool = False
    key_separator: bytes = b"\t"
    line_separator: bytes = b"\n"
    headers_separator: bytes = b","
    null_literal: bytes = b"null"

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> Formatter:
        def flag(name: str, default: bool) -> bool:
            return props.get(name, str(default)).strip().lower() == "true"

        return cls(flag("print.timestamp", False), flag("print.key", False), flag("print.value", True),
                   flag("print.partition", False), flag("print.offset", False), flag("print.headers", False),
                   props.get("key.separator", "\t").encode(), props.get("line.separator", "\n").encode(),
                   props.get("headers.separator", ",").encode(), props.get("null.literal", "null").encode())

    def format(self, partition: int, offset: int, timestamp: int, timestamp_type: TimestampType,
               headers: list[tuple[str, bytes | None]], key: bytes | None, value: bytes | None) -> bytes:
        fields: list[bytes] = []
        if self.print_timestamp:
            kind = "LogAppendTime" if timestamp_type is TimestampType.LOG_APPEND_TIME else "CreateTime"
            fields.append(f"{kind}:{timestamp}".encode())
        if self.print_partition:
            fields.append(f"Partition:{partition}".encode())
        if self.print_offset:
            fields.append(f"Offset:{offset}".encode())
        if self.print_headers:
            fields.append(self.headers_separator.join(
                k.encode() + b":" + (self.null_literal if v is None else v) for k, v in headers)
                if headers else b"NO_HEADERS")
        if self.print_key:
            fields.append(self.null_literal if key is None else key)
        if not self.print_value:  # as Kafka's: the last field ends with the line separator
            return self.key_separator.join(fields) + self.line_separator if fields else b""
        fields.append(self.null_literal if value is None else value)
        return self.key_separator.join(fields) + self.line_separator


@dataclass(slots=True)
class Limits:
    max_messages: int | None
    timeout_ms: int | None


class Consumer:
    """Positions per partition, fetched per leader in incremental sessions."""

    def __init__(self, client: KafkaClient, positions: dict[TopicPartition, int], isolation_level: int) -> None:
        self.client = client
        self.positions = positions
        self.isolation_level = isolation_level
        self.sessions: dict[int, FetchSession] = {}

    async def poll(self) -> list[tuple[TopicPartition, bytes]]:
        """One round of fetches; (partition, record bytes) with data, positions not moved yet."""
        out: list[tuple[TopicPartition, bytes]] = []
        by_leader = await self.client.leaders(self.positions)
        ids = {t: info.topic_id for t, info in self.client.cluster.topics.items()}
        for node, tps in by_leader.items():
            session = self.sessions.setdefault(node, FetchSession(node))
            version = await self.client.version_for(node, FetchRequest)
            wanted = {tp: FetchPosition(self.positions[tp], MAX_PARTITION_BYTES) for tp in tps}
            request = session.build(wanted, version, topic_ids=ids, max_wait_ms=POLL_WAIT_MS,
                                    isolation_level=self.isolation_level)
            try:
                response = await self.client.send(node, request, version=version,
                                                  timeout_ms=self.client.config.request_timeout_ms + POLL_WAIT_MS)
            except ClientError as exc:
                session.handle_error()
                if not exc.retriable:
                    raise
                self.client.invalidate({tp.topic for tp in tps})
                continue
            if not session.handle_response(response):
                continue
            for tp, got in response_partitions(response, version, ids).items():
                if got.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    earliest = await list_offsets(self.client, {tp: EARLIEST_TIMESTAMP})
                    self.positions[tp] = earliest[tp].offset  # auto.offset.reset=earliest
                elif got.error_code:
                    error = ClientError.from_code(got.error_code, None, f"Fetch of {tp}")
                    if not error.retriable:
                        raise error
                    self.client.invalidate([tp.topic])
                elif got.records:
                    out.append((tp, got.records))
        return out


async def consume(consumer: Consumer, fmt: Formatter, limits: Limits, out: BinaryIO,
                  stop: asyncio.Event) -> int:
    count = 0
    last_record = time.monotonic()
    while not stop.is_set():
        if limits.timeout_ms is not None and (time.monotonic() - last_record) * 1000 >= limits.timeout_ms:
            break
        for tp, data in await consumer.poll():
            scan = scan_batches(data, verify_crc=True)
            if scan.count == 0 and scan.stop_reason not in (None, StopReason.TRUNCATED):
                raise ClientError("CORRUPT_MESSAGE", f"Bad record data in {tp}: {scan.message}")
            for batch in scan.batches:
                if batch.next_offset <= consumer.positions[tp]:
                    continue
                if not batch.is_control:
                    for record in batch.records():
                        if record.offset < consumer.positions[tp]:
                            continue
                        out.write(fmt.format(tp.partition, record.offset, record.timestamp, batch.timestamp_type,
                                             record.headers, record.key, record.value))
                        count += 1
                        last_record = time.monotonic()
                        if limits.max_messages is not None and count >= limits.max_messages:
                            out.flush()
                            return count
                consumer.positions[tp] = batch.next_offset
        out.flush()
    return count


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="minikafka console-consumer",
                                description="Print the records of topics to standard output.")
    p.add_argument("--bootstrap-server", required=True, metavar="HOST1:PORT1,...",
                   help="REQUIRED: the broker(s) to connect to")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic", help="the topic to consume")
    which.add_argument("--include", "--whitelist", dest="include", metavar="REGEX",
                       help="consume every topic matching this regular expression")
    p.add_argument("--partition", type=int, help="consume only this partition")
    p.add_argument("--offset", default=None, metavar="earliest|latest|N",
                   help="with --partition: where to start (default latest)")
    p.add_argument("--from-beginning", action="store_true", help="start at the earliest offset")
    p.add_argument("--max-messages", type=int, help="stop after this many records")
    p.add_argument("--timeout-ms", type=int, help="stop when no record came for this long")
    p.add_argument("--isolation-level", default="read_uncommitted",
                   choices=["read_uncommitted", "read_committed"], help="read_committed hides aborted records")
    p.add_argument("--property", action="append", default=[], metavar="KEY=VALUE",
                   help="formatter settings: print.timestamp, print.key, print.value, print.partition, "
                        "print.offset, print.headers, key.separator, line.separator, headers.separator, "
                        "null.literal")
    p.add_argument("--formatter-config", metavar="FILE", help="a properties file of formatter settings")
    p.add_argument("--consumer-property", action="append", default=[], metavar="KEY=VALUE",
                   help="a consumer setting (client.id, request.timeout.ms, ...)")
    p.add_argument("--consumer.config", dest="consumer_config", metavar="FILE",
                   help="a properties file of consumer settings (--consumer-property wins)")
    p.add_argument("--command-config", dest="command_config", metavar="FILE",
                   help="the same as --consumer.config")
    p.add_argument("--group", help="refused: this tool reads without joining a consumer group")
    p.add_argument("--skip-message-on-error", action="store_true", help="accepted for compatibility")
    return p


async def _start(client: KafkaClient, args: argparse.Namespace) -> dict[TopicPartition, int]:
    topics = await Admin(client).list_topics()
    if args.topic is not None:
        chosen = [t for t in topics if t.name == args.topic]
        if not chosen:
            await Admin(client).describe_topics([args.topic])  # UNKNOWN_TOPIC_OR_PARTITION, named
    else:
        pattern = topic_filter(args.include) or re.compile(".*")
        chosen = [t for t in topics if pattern.fullmatch(t.name) and not t.is_internal]
    tps = [TopicPartition(t.name, p) for t in chosen for p in sorted(t.partitions)]
    if args.partition is not None:
        tps = [tp for tp in tps if tp.partition == args.partition]
        if not tps:
            raise ClientError("UNKNOWN_TOPIC_OR_PARTITION", f"Partition {args.partition} does not exist")
    if args.offset not in (None, "earliest", "latest"):
        return dict.fromkeys(tps, int(args.offset))
    earliest = args.from_beginning or args.offset == "earliest"
    found = await list_offsets(client, dict.fromkeys(tps, EARLIEST_TIMESTAMP if earliest else LATEST_TIMESTAMP))
    return {tp: o.offset for tp, o in found.items()}


async def run(args: argparse.Namespace, config: ClientConfig, fmt: Formatter, out: BinaryIO, err: TextIO) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    count = 0
    try:
        async with KafkaClient(args.bootstrap_server, config) as client:
            positions = await _start(client, args)
            consumer = Consumer(client, positions, 1 if args.isolation_level == "read_committed" else 0)
            count = await consume(consumer, fmt, Limits(args.max_messages, args.timeout_ms), out, stop)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        print(f"Processed a total of {count} messages", file=err)
    return 0


def main(argv: Sequence[str] | None = None, out: BinaryIO | None = None, err: TextIO | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(list(argv) if argv is not None else None)
    errors = err if err is not None else sys.stderr
    if args.group is not None:
        parser.error("--group is not supported: this consumer reads without joining a consumer group "
                     "(use --from-beginning, --partition and --offset)")
    if args.offset is not None and args.partition is None:
        parser.error("The partition is required when offset is specified.")
    if args.offset is not None and args.from_beginning:
        parser.error("Options from-beginning and offset cannot be specified together.")
    if args.offset not in (None, "earliest", "latest") and not args.offset.isdigit():
        parser.error(f"The provided offset value '{args.offset}' is incorrect. Valid values are "
                     "'earliest', 'latest', or a non-negative long.")
    try:
        fmt_props = read_properties(args.formatter_config)
        fmt_props.update(key_values(args.property, "property"))
        props = read_properties(args.consumer_config or args.command_config)
        props.update(key_values(args.consumer_property, "consumer property"))
        config = ClientConfig.from_properties(props, ClientConfig(client_id="console-consumer"))
        return asyncio.run(run(args, config, Formatter.from_properties(fmt_props),
                               out if out is not None else sys.stdout.buffer, errors))
    except (ClientError, ProtocolError) as exc:
        print(f"ERROR Error processing message, terminating consumer process: {exc}", file=errors)
        return 1


if __name__ == "__main__":
    sys.exit(main())
