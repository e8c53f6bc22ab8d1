"""``minikafka log-dirs``: the log directories of brokers and the partitions in them, like
Kafka's ``kafka-log-dirs.sh --describe`` (same flags, same output)::

    Querying brokers for log directories information
    Received log directory information from brokers 0
    {"brokers":[{"broker":0,"logDirs":[{"partitions":[{"partition":"t-0","size":68,
      "offsetLag":0,"isFuture":false}],"error":null,"logDir":"/data"}]}],"version":1}

``--broker-list 0,1`` (default: every broker), ``--topic-list a,b`` (default: every topic).
A broker that is not in the cluster is an error naming it; errors go to stderr, exit 1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from cli.common import add_connection_args, client_config, tool_config
from client import Admin, ClientError, KafkaClient, error_name

CLIENT_ID = "log-dirs-tool"


class CommandError(Exception):
    pass


def _ids(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise CommandError(f"--broker-list expects broker ids like 0,1,2, got {text!r}") from None


def _error_class(code: int) -> str | None:
    """The Java exception class Kafka's tool names for a log dir's error (None: no error)."""
    if code == 0:
        return None
    name = error_name(code)
    words = "".join(w.capitalize() for w in name.split("_"))
    return f"org.apache.kafka.common.errors.{words.replace('KafkaStorageError', 'KafkaStorage')}Exception"


async def _run(args: argparse.Namespace, out: TextIO) -> None:
    topics = {t for t in args.topic_list.split(",") if t}
    config = client_config(args, tool_config(30_000, CLIENT_ID))
    async with KafkaClient(args.bootstrap_server, config) as client:
        admin = Admin(client)
        cluster = sorted((await admin.describe_cluster()).brokers)
        wanted = _ids(args.broker_list) or cluster
        missing = [b for b in wanted if b not in cluster]
        if missing:
            raise CommandError(
                "ERROR: The given brokers do not exist from --broker-list: "
                f"{','.join(map(str, missing))}. Current existent brokers: {','.join(map(str, cluster))}")
        print("Querying brokers for log directories information", file=out)
        brokers: list[dict[str, Any]] = []
        for broker in wanted:
            dirs = await admin.describe_log_dirs(broker)
            brokers.append({"broker": broker, "logDirs": [{
                "partitions": [{"partition": str(tp), "size": size, "offsetLag": lag, "isFuture": future}
                               for tp, (size, lag, future) in sorted(d.partitions.items())
                               if not topics or tp.topic in topics],
                "error": _error_class(d.error_code),
                "logDir": d.path,
            } for d in dirs]})
    print(f"Received log directory information from brokers {','.join(map(str, wanted))}", file=out)
    print(json.dumps({"brokers": brokers, "version": 1}, separators=(",", ":")), file=out)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="minikafka log-dirs",
                                description="Query log directory usage on the specified brokers.")
    add_connection_args(p)
    p.add_argument("--describe", action="store_true", required=True,
                   help="REQUIRED: describe the log directories of the brokers")
    p.add_argument("--broker-list", default="", metavar="0,1,2",
                   help="the brokers to query (default: every broker in the cluster)")
    p.add_argument("--topic-list", default="", metavar="topic1,topic2",
                   help="the topics to list (default: every topic)")
    return p


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    args = _parser().parse_args(list(argv) if argv is not None else None)
    try:
        asyncio.run(_run(args, out if out is not None else sys.stdout))
    except (CommandError, ClientError) as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
