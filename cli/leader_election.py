"""``minikafka leader-election``: elect preferred or unclean leaders, like kafka-leader-election.sh.

    minikafka leader-election --bootstrap-server H:P --election-type PREFERRED|UNCLEAN
        (--all-topic-partitions | --topic T --partition P | --path-to-json-file FILE)

The request (ElectLeaders) goes to the controller (found with DescribeCluster; asked again
when a broker answers NOT_CONTROLLER). The JSON file is kafka-leader-election's:
``{"partitions": [{"topic": "t", "partition": 0}, ...]}``. Output and exit code are
kafka-leader-election 3.9's::

    Successfully completed leader election (PREFERRED) for partitions t-0, t-1
    Valid replica already elected for partitions t-2
    Error completing leader election (PREFERRED) for partition: t-3: org.apache.kafka.common.errors.PreferredLeaderNotAvailableException: ...

then, when some failed, ``N replica(s) could not be elected`` on stderr and exit 1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from cli.common import tool_config
from client import ClientError, KafkaClient
from protocol.errors import ErrorCode
from protocol.messages.describe_cluster import DescribeClusterRequest
from protocol.messages.elect_leaders import ElectLeadersRequest, ElectLeadersResponse

TYPES = {"PREFERRED": 0, "UNCLEAN": 1}
DEFAULT_TIMEOUT_MS = 30_000
MAX_CONTROLLER_ATTEMPTS = 10
RETRY_BACKOFF_S = 0.5


class CommandError(Exception):
    pass


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="minikafka leader-election",
                                description="Elect preferred or unclean partition leaders.")
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    p.add_argument("--election-type", required=True, type=str.upper, choices=sorted(TYPES))
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--all-topic-partitions", action="store_true")
    which.add_argument("--topic")
    which.add_argument("--path-to-json-file", type=Path)
    p.add_argument("--partition", type=int)
    p.add_argument("--timeout-ms", type=int, default=DEFAULT_TIMEOUT_MS)
    return p


def _partitions(args: argparse.Namespace) -> dict[str, list[int]] | None:
    if args.all_topic_partitions:
        return None
    if args.topic is not None:
        if args.partition is None:
            raise CommandError("Missing required option(s): partition")
        return {args.topic: [args.partition]}
    try:
        doc = json.loads(args.path_to_json_file.read_text())
        entries = doc["partitions"]
        out: dict[str, list[int]] = {}
        for entry in entries:
            out.setdefault(str(entry["topic"]), []).append(int(entry["partition"]))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CommandError(f"Replica election data is invalid: {exc}") from None
    if not out:
        raise CommandError("Replica election data is empty")
    return out


def _java_exception(code: int) -> str:
    """Kafka's exception class for an error code (UNKNOWN_TOPIC_OR_PARTITION ->
    org.apache.kafka.common.errors.UnknownTopicOrPartitionException)."""
    try:
        name = ErrorCode(code).name
    except ValueError:
        name = f"UNKNOWN_ERROR_{code}"
    camel = "".join(part.capitalize() for part in name.split("_"))
    return f"org.apache.kafka.common.errors.{camel}Exception"


async def _elect(args: argparse.Namespace,
                 wanted: dict[str, list[int]] | None) -> ElectLeadersResponse:
    request = ElectLeadersRequest(
        election_type=TYPES[args.election_type], timeout_ms=args.timeout_ms,
        topic_partitions=None if wanted is None else [
            ElectLeadersRequest.TopicPartitions(topic=t, partitions=sorted(ps))
            for t, ps in sorted(wanted.items())])
    async with KafkaClient(args.bootstrap_server, tool_config(args.timeout_ms)) as client:
        for _ in range(MAX_CONTROLLER_ATTEMPTS):
            cluster = await client.send_any(DescribeClusterRequest())
            for broker in cluster.brokers:
                client.add_broker(broker.broker_id, broker.host, broker.port)
            if cluster.controller_id >= 0:
                response = await client.send(cluster.controller_id, request)
                if response.error_code != ErrorCode.NOT_CONTROLLER:
                    return response
            await asyncio.sleep(RETRY_BACKOFF_S)
    raise CommandError("no controller answered ElectLeaders")


def main(argv: list[str]) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        wanted = _partitions(args)
        response = asyncio.run(_elect(args, wanted))
    except (CommandError, ClientError) as exc:
        print(str(exc), file=sys.stderr)
        return 1
    if response.error_code != ErrorCode.NO_ERROR:
        print(f"Error while making request: {ErrorCode(response.error_code).name}",
              file=sys.stderr)
        return 1
    succeeded, noop, failed = [], [], []
    for topic in response.replica_election_results:
        for p in topic.partition_result:
            tp = f"{topic.topic}-{p.partition_id}"
            if p.error_code == ErrorCode.NO_ERROR:
                succeeded.append(tp)
            elif p.error_code == ErrorCode.ELECTION_NOT_NEEDED:
                noop.append(tp)
            else:
                failed.append((tp, f"{_java_exception(p.error_code)}: {p.error_message}"))
    kind = args.election_type
    if succeeded:
        print(f"Successfully completed leader election ({kind}) for partitions "
              f"{', '.join(succeeded)}")
    if noop:
        print(f"Valid replica already elected for partitions {', '.join(noop)}")
    for tp, error in failed:
        print(f"Error completing leader election ({kind}) for partition: {tp}: {error}")
    if failed:
        print(f"{len(failed)} replica(s) could not be elected", file=sys.stderr)
        return 1
    return 0
