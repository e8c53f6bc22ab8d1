"""The ``minikafka`` command line.

    minikafka broker [--config server.properties] [--override KEY=VALUE ...]
    minikafka dump-log FILE... [options]        (storage.dump.main)
    minikafka topics --bootstrap-server H:P ... (cli.topics.main)
    minikafka spark-ingest --bootstrap-server H:P --topics T --output DIR ... (spark_ingest.bulk_consume.main)
    minikafka consumer-groups --bootstrap-server H:P ... (cli.consumer_groups.main)
    minikafka configs --bootstrap-server H:P ... (cli.configs.main)
    minikafka acls --bootstrap-server H:P ... (cli.acls.main)

``broker`` runs one broker in the foreground until SIGTERM/SIGINT (then exits 0 after an
ordered shutdown). An unknown or invalid property exits 1 with a message naming it.
The two tool subcommands import their modules only when used.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

USAGE = """usage: minikafka {broker,dump-log,topics,consumer-groups,configs,acls,spark-ingest} ...

  broker     run a broker: [--config server.properties] [--override KEY=VALUE ...]
  dump-log   print log segments and indexes (like kafka-dump-log.sh)
  topics     create, list, describe, alter, delete topics (like kafka-topics.sh)
  spark-ingest  land topics in Parquet with Spark, exactly once (needs the spark extra)
  consumer-groups  list, describe, reset offsets of, delete groups (like kafka-consumer-groups.sh)
  configs    SCRAM credentials and quotas of users and client ids (like kafka-configs.sh)
  acls       add, remove, list ACLs (like kafka-acls.sh)
"""


def _broker_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="minikafka broker",
                                     description="Run a Kafka-protocol broker in the foreground.")
    parser.add_argument("--config", type=Path, default=None,
                        help="a server.properties file (Kafka property names)")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="set a property, overriding the file (repeatable)")
    args = parser.parse_args(argv)
    # Validate the configuration before importing the server (and every codec it loads),
    # so a bad property fails fast.
    from broker.config import BrokerConfig, ConfigError

    try:
        config = BrokerConfig.load(args.config, args.override)
    except ConfigError as exc:
        print(f"minikafka: error: {exc}", file=sys.stderr)
        return 1
    from broker.server import configure_logging, run_broker

    configure_logging()
    return run_broker(config)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE, end="", file=sys.stdout if args else sys.stderr)
        return 0 if args else 2
    command, rest = args[0], args[1:]
    if command == "broker":
        return _broker_main(rest)
    if command == "dump-log":
        from storage.dump import main as dump_main  # type: ignore[import-not-found,unused-ignore]

        return int(dump_main(rest))
    if command == "topics":
        from cli.topics import main as topics_main

        return int(topics_main(rest))
    if command == "consumer-groups":
        from cli.consumer_groups import main as groups_main

        return groups_main(rest)
    if command == "configs":
        from cli.configs import main as configs_main

        return configs_main(rest)
    if command == "acls":
        from cli.acls import main as acls_main

        return acls_main(rest)
    if command == "spark-ingest":
        from spark_ingest.bulk_consume import main as ingest_main

        return int(ingest_main(rest))
    print(f"minikafka: unknown command {command!r}\n{USAGE}", end="", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
