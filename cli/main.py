"""The ``minikafka`` command line: one program, a subcommand per tool.

    minikafka broker [--config server.properties] [--override KEY=VALUE ...]
    minikafka topics | consumer-groups | configs | acls | get-offsets | log-dirs
              | console-producer | console-consumer  --bootstrap-server H:P ...
    minikafka dump-log FILE... [options]
    minikafka spark-ingest --bootstrap-server H:P --topics T --output DIR ...
    minikafka leader-election --bootstrap-server H:P ...   (kafka-leader-election)
    minikafka reassign-partitions --bootstrap-server H:P ... (kafka-reassign-partitions)
    minikafka cluster up|status|down ...                  (a development cluster)

``broker`` runs one broker in the foreground until SIGTERM/SIGINT (then exits 0 after an
ordered shutdown); its properties come from the file, then ``MINIKAFKA_*`` environment
variables (``cli.env_config``), then ``--override``; an unknown or invalid property exits 1
with a message naming it. The tools are Kafka's (same flags, same output) and import their
modules only when used. Output piped into a reader that stops early (``| head``) ends the
command quietly with exit 0, as Kafka's tools do.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path

# subcommand -> one line of help
TOOLS: dict[str, str] = {
    "topics": "create, list, describe, alter, delete topics (kafka-topics)",
    "consumer-groups": "list, describe, reset offsets of, delete groups (kafka-consumer-groups)",
    "configs": "describe and alter configs of topics, brokers, groups; user and client quotas "
               "and SCRAM credentials (kafka-configs)",
    "acls": "add, remove, list ACLs (kafka-acls)",
    "get-offsets": "offsets of partitions at a time (kafka-get-offsets)",
    "log-dirs": "log directories of brokers and their partitions (kafka-log-dirs)",
    "console-producer": "produce lines from stdin (kafka-console-producer)",
    "console-consumer": "print records to stdout (kafka-console-consumer)",
    "dump-log": "print log segments and indexes (kafka-dump-log)",
    "spark-ingest": "land topics in Parquet with Spark, exactly once (needs the spark extra)",
    "leader-election": "elect preferred or unclean leaders (kafka-leader-election)",
    "reassign-partitions": "move partition replicas between brokers (kafka-reassign-partitions)",
    "cluster": "up|status|down: ZooKeeper and N brokers on 127.0.0.1 for development",
}

USAGE = "usage: minikafka {broker," + ",".join(TOOLS) + "} ...\n\n" + "\n".join(
    [f"  {'broker':<17} run a broker: [--config server.properties] [--override KEY=VALUE ...]"]
    + [f"  {name:<17} {help_}" for name, help_ in TOOLS.items()]) + "\n"


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
    from cli.env_config import EnvConfigError, broker_overrides

    try:
        from_env = broker_overrides(os.environ)
    except EnvConfigError as exc:
        print(f"minikafka: error: {exc}", file=sys.stderr)
        return 1
    try:
        config = BrokerConfig.load(args.config, [*(f"{p}={v}" for _, p, v in from_env), *args.override])
    except ConfigError as exc:
        print(f"minikafka: error: {exc}{_env_source(str(exc), from_env, args.override)}", file=sys.stderr)
        return 1
    from broker.server import configure_logging, run_broker

    configure_logging()
    return run_broker(config)


def _env_source(message: str, from_env: list[tuple[str, str, str]], overrides: list[str]) -> str:
    """" (from environment variable X)" when the property a ConfigError names came from X."""
    overridden = {o.partition("=")[0].strip() for o in overrides}
    named = [(v, p) for v, p, _ in from_env if p not in overridden and re.search(rf"\b{re.escape(p)}\b", message)]
    if not named:
        return ""
    variable = max(named, key=lambda vp: len(vp[1]))[0]
    return f" (from environment variable {variable})"


def _tool(command: str) -> Callable[[list[str]], int]:
    """The tool's main, imported only when used (each import is written out, so the import
    linter sees every edge)."""
    if command == "topics":
        from cli.topics import main as topics_main
        return topics_main
    if command == "consumer-groups":
        from cli.consumer_groups import main as groups_main
        return groups_main
    if command == "configs":
        from cli.configs import main as configs_main
        return configs_main
    if command == "acls":
        from cli.acls import main as acls_main
        return acls_main
    if command == "get-offsets":
        from cli.get_offsets import main as get_offsets_main
        return get_offsets_main
    if command == "log-dirs":
        from cli.log_dirs import main as log_dirs_main
        return log_dirs_main
    if command == "console-producer":
        from cli.console_producer import main as producer_main
        return producer_main
    if command == "console-consumer":
        from cli.console_consumer import main as consumer_main
        return consumer_main
    if command == "dump-log":
        from storage.dump import main as dump_main
        return dump_main
    if command == "leader-election":
        from cli.leader_election import main as election_main
        return election_main
    if command == "reassign-partitions":
        from cli.reassign_partitions import main as reassign_main
        return reassign_main
    if command == "cluster":
        from cli.cluster import main as cluster_main
        return cluster_main
    from spark_ingest.bulk_consume import main as ingest_main
    return ingest_main


def _quiet_broken_pipe() -> int:
    """The reader of our output went away (``| head``): no traceback, exit 0 (Kafka's tools
    ignore it the same way); stdout is pointed at /dev/null so the final flush succeeds."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE, end="", file=sys.stdout if args else sys.stderr)
        return 0 if args else 2
    command, rest = args[0], args[1:]
    try:
        if command == "broker":
            return _broker_main(rest)
        if command in TOOLS:
            code = int(_tool(command)(rest))
            sys.stdout.flush()
            return code
    except BrokenPipeError:
        return _quiet_broken_pipe()
    print(f"minikafka: unknown command {command!r}\n{USAGE}", end="", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
