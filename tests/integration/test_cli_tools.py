"""The command-line tools against a real broker, with Kafka's tools' expectations: topics'
report flags, --replica-assignment and --command-config; configs, get-offsets, log-dirs and
the console producer and consumer (output compared with Kafka's own GetOffsetShell and
kafka-log-dirs on the same broker); a reader that stops early (``| head``); broker
properties from MINIKAFKA_* variables. Tools run in-process through their ``main`` (the same
code the ``minikafka`` entry point runs) except where the process itself is the point."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cli import configs, console_consumer, console_producer, get_offsets, log_dirs, topics
from client.partitioner import partition_for_key
from client.sync import SyncClient
from protocol.records import NewRecord, build_batch
from protocol.topic_partition import TopicPartition
from tests.integration.broker_process import REPO_ROOT, BrokerProcess
from tests.integration.test_java_admin import java_tool

pytestmark = pytest.mark.timeout(120)


def run(main: Any, *args: str, stdin: bytes | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err):
        if stdin is not None:
            code = main(list(args), source=io.BytesIO(stdin), err=err)
        else:
            code = main(list(args), out=out)
    return code, out.getvalue(), err.getvalue()


def consume(bs: str, *args: str) -> tuple[int, bytes, str]:
    out, err = io.BytesIO(), io.StringIO()
    code = console_consumer.main(["--bootstrap-server", bs, *args], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_topics_reports_overrides_and_replica_assignment(module_broker: Any, tmp_path: Path) -> None:
    bs = module_broker.bootstrap
    assert run(topics.main, "--bootstrap-server", bs, "--create", "--topic", "rep-strict", "--partitions", "2",
               "--config", "min.insync.replicas=2")[0] == 0
    code, out, _ = run(topics.main, "--bootstrap-server", bs, "--create", "--topic", "rep-plain",
                       "--replica-assignment", "0,0,0")
    assert code == 0 and out == "Created topic rep-plain.\n"

    def describe(*flags: str) -> list[str]:
        code, out, _ = run(topics.main, "--bootstrap-server", bs, "--describe", "--topic", "rep-.*", *flags)
        assert code == 0, out
        return out.splitlines()

    assert len(describe()) == 2 + 1 + 3 + 1
    assert describe("--under-replicated-partitions") == []  # one node: every ISR is whole
    assert [line.split("\t")[1:3] for line in describe("--under-min-isr-partitions")] == [
        ["Topic: rep-strict", "Partition: 0"], ["Topic: rep-strict", "Partition: 1"]]
    assert [line.split("\t")[1] for line in describe("--at-min-isr-partitions")] == ["Topic: rep-plain"] * 3
    assert describe("--unavailable-partitions") == []
    overrides = describe("--topics-with-overrides")
    assert len(overrides) == 1 and overrides[0].startswith("Topic: rep-strict\t")
    assert overrides[0].endswith("Configs: min.insync.replicas=2")

    code, _, _ = run(topics.main, "--bootstrap-server", bs, "--alter", "--topic", "rep-plain", "--partitions",
                     "4", "--replica-assignment", "0,0,0,0")
    assert code == 0
    with SyncClient(bs) as c:
        assert sorted(c.describe_topics(["rep-plain"])[0].partitions) == [0, 1, 2, 3]
    code, out, _ = run(topics.main, "--bootstrap-server", bs, "--list", "--under-replicated-partitions")
    assert code == 1 and "can't be used with" in out

    props = tmp_path / "client.properties"
    props.write_text("client.id=props-tool\nrequest.timeout.ms=5000\nacks=all\n")
    code, out, err = run(topics.main, "--bootstrap-server", bs, "--list", "--command-config", str(props))
    assert code == 0 and "rep-plain" in out.split()
    assert "WARN These configurations '[acks]' were supplied but are not used." in err
    code, out, _ = run(topics.main, "--bootstrap-server", bs, "--list", "--command-config", str(tmp_path / "nope"))
    assert code == 1 and "nope" in out
    props.write_text("security.protocol=SASL_SSL\n")  # Kafka's default mechanism, GSSAPI
    code, out, _ = run(topics.main, "--bootstrap-server", bs, "--list", "--command-config", str(props))
    assert code == 1 and "sasl.mechanism=GSSAPI is not supported" in out
    props.write_text("security.protocol=TLS\n")
    code, out, _ = run(topics.main, "--bootstrap-server", bs, "--list", "--command-config", str(props))
    assert code == 1 and "security.protocol=TLS is not supported" in out


def test_configs_describe_and_alter(module_broker: Any) -> None:
    bs = module_broker.bootstrap
    with SyncClient(bs) as c:
        c.create_topic("cfg-t", 1, 1, {"retention.ms": "100000"})
    code, out, _ = run(configs.main, "--bootstrap-server", bs, "--describe", "--topic", "cfg-t")
    assert code == 0 and out.splitlines() == [
        "Dynamic configs for topic cfg-t are:",
        "  retention.ms=100000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=100000}"]
    code, out, _ = run(configs.main, "--bootstrap-server", bs, "--alter", "--entity-type", "topics",
                       "--entity-name", "cfg-t", "--add-config", "cleanup.policy=[compact,delete],segment.ms=60000",
                       "--delete-config", "retention.ms")
    assert code == 0 and out == "Completed updating config for topic cfg-t.\n"
    code, out, _ = run(configs.main, "--bootstrap-server", bs, "--describe", "--topic", "cfg-t")
    assert [line.split("=")[0].strip() for line in out.splitlines()[1:]] == ["cleanup.policy", "segment.ms"]
    assert "  cleanup.policy=compact,delete sensitive=false" in out
    code, out, _ = run(configs.main, "--bootstrap-server", bs, "--describe", "--all", "--topic", "cfg-t")
    assert out.startswith("All configs for topic cfg-t are:\n") and "  min.insync.replicas=1 " in out
    code, _, err = run(configs.main, "--bootstrap-server", bs, "--alter", "--topic", "cfg-t",
                       "--delete-config", "retention.ms")
    assert code == 1 and "Invalid config(s): retention.ms" in err
    code, out, _ = run(configs.main, "--bootstrap-server", bs, "--describe", "--entity-type", "brokers")
    assert code == 0 and "Dynamic configs for broker 0 are:" in out
    assert "Default configs for brokers in the cluster are:" in out
    code, _, err = run(configs.main, "--bootstrap-server", bs, "--describe", "--entity-type", "ips")
    assert code == 1 and "not supported yet" in err


def test_configs_cluster_wide_broker_defaults(module_broker: Any) -> None:
    """kafka-configs --entity-default on a single node: stored in the log dir, applied, and
    described with Kafka's precedence (this broker's dynamic value over the cluster
    default over server.properties over Kafka's default)."""
    bs = module_broker.bootstrap

    def configs_cli(*args: str) -> str:
        code, out, err = run(configs.main, "--bootstrap-server", bs, *args)
        assert code == 0, err
        return out

    defaults = ("--entity-type", "brokers", "--entity-default")
    assert configs_cli("--alter", *defaults, "--add-config",
                       "num.io.threads=12,follower.replication.throttled.rate=5000") == (
        "Completed updating default config for brokers in the cluster.\n")
    assert configs_cli("--describe", *defaults).splitlines() == [
        "Default configs for brokers in the cluster are:",
        "  follower.replication.throttled.rate=5000 sensitive=false synonyms="
        "{DYNAMIC_DEFAULT_BROKER_CONFIG:follower.replication.throttled.rate=5000}",
        "  num.io.threads=12 sensitive=false synonyms="
        "{DYNAMIC_DEFAULT_BROKER_CONFIG:num.io.threads=12}"]
    broker = ("--entity-type", "brokers", "--entity-name", "0")
    everything = configs_cli("--describe", "--all", *broker)
    assert ("  num.io.threads=12 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:"
            "num.io.threads=12, DEFAULT_CONFIG:num.io.threads=8}\n") in everything
    configs_cli("--alter", *broker, "--add-config", "num.io.threads=16")
    assert configs_cli("--describe", *broker).splitlines() == [
        "Dynamic configs for broker 0 are:",
        "  num.io.threads=16 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:num.io.threads=16, "
        "DYNAMIC_DEFAULT_BROKER_CONFIG:num.io.threads=12, DEFAULT_CONFIG:num.io.threads=8}"]
    # Kafka's DynamicThreadPool rule: within half and double of the value in force (16).
    code, _, err = run(configs.main, "--bootstrap-server", bs, "--alter", *defaults,
                       "--add-config", "num.io.threads=40")
    assert code == 0  # the default does not apply here: this broker's own 16 wins
    code, _, err = run(configs.main, "--bootstrap-server", bs, "--alter", *broker,
                       "--add-config", "num.io.threads=33")
    assert code == 1 and ("Dynamic thread count update validation failed for "
                          "num.io.threads=33, value should not be greater than double the "
                          "current value 16") in err
    code, _, err = run(configs.main, "--bootstrap-server", bs, "--alter", *defaults,
                       "--add-config", "log.retention.hours=1")
    assert code == 1 and "Cannot update these configs dynamically: ['log.retention.hours']" in err
    configs_cli("--alter", *defaults, "--delete-config", "num.io.threads")
    configs_cli("--alter", *broker, "--delete-config", "num.io.threads")
    assert "num.io.threads=8 sensitive=false synonyms={DEFAULT_CONFIG:num.io.threads=8}" in (
        configs_cli("--describe", "--all", *broker))
    configs_cli("--alter", *defaults, "--delete-config", "follower.replication.throttled.rate")
    assert configs_cli("--describe", *defaults) == (
        "Default configs for brokers in the cluster are:\n")
    stored = json.loads((module_broker.log_dir / "minikafka-broker-configs.json").read_text())
    assert stored == {"version": 1, "entities": {}}
    text = module_broker.stderr_text()
    assert ("cluster-wide default dynamic broker configs now {'follower.replication.throttled"
            ".rate': '5000', 'num.io.threads': '12'}") in text


def _fill(bs: str, topic: str, partitions: int) -> None:
    with SyncClient(bs) as c:
        c.create_topic(topic, partitions, 1)
        for p in range(partitions):
            c.produce(TopicPartition(topic, p), build_batch(
                [NewRecord(None, b"x", (), 1_000 * (i + 1)) for i in range(p % 3 + 1)]))


def test_get_offsets_like_get_offset_shell(module_broker: Any) -> None:
    bs = module_broker.bootstrap
    _fill(bs, "offs", 11)

    def offsets(*args: str) -> list[str]:
        code, out, err = run(get_offsets.main, "--bootstrap-server", bs, *args)
        assert code == 0, err
        return out.splitlines()

    latest = offsets("--topic", "offs")
    assert latest[:3] == ["offs:0:1", "offs:1:2", "offs:10:2"]  # Kafka sorts by the text "offs-10"
    assert sorted(latest) == sorted(f"offs:{p}:{p % 3 + 1}" for p in range(11))
    assert offsets("--topic", "offs", "--partitions", "2,4", "--time", "earliest") == ["offs:2:0", "offs:4:0"]
    assert offsets("--topic-partitions", "offs:1-3", "--time", "-3") == ["offs:1:1", "offs:2:2"]
    assert offsets("--topic", "offs", "--partitions", "2", "--time", "2500") == ["offs:2:2"]
    assert offsets("--topic", "offs", "--partitions", "2", "--time", "9999999") == []
    code, _, err = run(get_offsets.main, "--bootstrap-server", bs, "--topic", "nothing-like-this")
    assert code == 1 and "Error occurred: Could not match any topic-partitions" in err


@pytest.mark.java
def test_get_offsets_and_log_dirs_match_kafka_tools(module_broker: Any) -> None:
    bs = module_broker.bootstrap
    _fill(bs, "parity", 3)
    java = java_tool("org.apache.kafka.tools.GetOffsetShell", bs, "--topic", "parity")
    assert java.returncode == 0, java.stderr
    assert run(get_offsets.main, "--bootstrap-server", bs, "--topic", "parity")[1] == java.stdout

    java = java_tool("org.apache.kafka.tools.LogDirsCommand", bs, "--describe", "--topic-list", "parity")
    assert java.returncode == 0, java.stderr
    code, ours, _ = run(log_dirs.main, "--bootstrap-server", bs, "--describe", "--topic-list", "parity")
    assert code == 0 and ours.splitlines()[:2] == java.stdout.splitlines()[:2]

    def normal(text: str) -> Any:
        data = json.loads(text.splitlines()[2])
        for b in data["brokers"]:
            for d in b["logDirs"]:
                d["partitions"].sort(key=lambda p: p["partition"])
        return data

    assert normal(ours) == normal(java.stdout)
    assert [p["partition"] for p in normal(ours)["brokers"][0]["logDirs"][0]["partitions"]] == [
        "parity-0", "parity-1", "parity-2"]
    code, _, err = run(log_dirs.main, "--bootstrap-server", bs, "--describe", "--broker-list", "0,7")
    assert code == 1 and "The given brokers do not exist from --broker-list: 7" in err


def test_console_producer_and_consumer(module_broker: Any) -> None:
    bs = module_broker.bootstrap
    with SyncClient(bs) as c:
        c.create_topic("console", 3, 1)
    lines = b"".join(b"h:%d\tk%d:v%d\n" % (i, i, i) for i in range(20)) + b"NULL\tNULL:no key\n"
    code, _, err = run(console_producer.main, "--bootstrap-server", bs, "--topic", "console",
                       "--property", "parse.key=true", "--property", "key.separator=:",
                       "--property", "parse.headers=true", "--property", "null.marker=NULL",
                       "--compression-codec", "lz4", stdin=lines)
    assert code == 0, err
    code, out, err = consume(bs, "--topic", "console", "--from-beginning", "--max-messages", "21",
                             "--property", "print.key=true", "--property", "print.partition=true",
                             "--property", "print.headers=true", "--property", "key.separator=|")
    assert code == 0 and err.endswith("Processed a total of 21 messages\n")
    got = sorted(out.decode().splitlines())
    expected = sorted([f"Partition:{partition_for_key(b'k%d' % i, 3)}|h:{i}|k{i}|v{i}" for i in range(20)])
    assert [g for g in got if "|k" in g] == expected  # keyed records land where Kafka's partitioner puts them
    assert [g.split("|", 1)[1] for g in got if "|k" not in g] == ["NO_HEADERS|null|no key"]

    in_zero = sum(1 for g in got if g.startswith("Partition:0|"))
    code, out, _ = consume(bs, "--topic", "console", "--partition", "0", "--offset", "1", "--timeout-ms", "1500",
                           "--property", "print.offset=true")
    assert code == 0 and [line.split("\t")[0] for line in out.decode().splitlines()] == [
        f"Offset:{o}" for o in range(1, in_zero)]
    code, out, err = consume(bs, "--topic", "console", "--timeout-ms", "1000")  # from the end: nothing new
    assert code == 0 and out == b"" and "Processed a total of 0 messages" in err
    with pytest.raises(SystemExit):
        console_consumer.main(["--bootstrap-server", bs, "--topic", "console", "--group", "g"])
    code, _, err = run(console_producer.main, "--bootstrap-server", bs, "--topic", "console",
                       "--property", "parse.key=true", stdin=b"no separator here\n")
    assert code == 1 and "No key separator found on line number 1" in err


def _tool_process(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "cli", *args], cwd=REPO_ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ, **(env or {})})


def test_output_into_a_reader_that_stops_early(module_broker: Any, tmp_path: Path) -> None:
    """``minikafka topics --list | head -1``: the reader is gone before we write; no traceback."""
    bs = module_broker.bootstrap
    for argv in (["topics", "--bootstrap-server", bs, "--list"],
                 ["dump-log", *(str(p) for p in sorted(Path(module_broker.log_dir).glob("*/*.log"))[:1])]):
        read_end, write_end = os.pipe()
        os.close(read_end)
        proc = subprocess.run([sys.executable, "-m", "cli", *argv], cwd=REPO_ROOT, stdout=write_end,
                              stderr=subprocess.PIPE, timeout=60, check=False)
        os.close(write_end)
        assert proc.returncode == 0, proc.stderr
        assert b"Traceback" not in proc.stderr and b"BrokenPipe" not in proc.stderr


def test_broker_properties_from_minikafka_variables(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path, env={"MINIKAFKA_NUM_PARTITIONS": "4",
                                          "MINIKAFKA_AUTO_CREATE_TOPICS_ENABLE": "true"})
    broker.overrides.pop("log.dirs")  # from the environment instead
    broker.env["MINIKAFKA_LOG_DIRS"] = str(tmp_path / "env-data")
    with broker:
        code, _, err = run(console_producer.main, "--bootstrap-server", broker.bootstrap, "--topic", "auto",
                           stdin=b"x\n")  # asks for the topic: auto-created with num.partitions
        assert code == 0, err
        with SyncClient(broker.bootstrap) as c:
            assert sorted(c.describe_topics(["auto"])[0].partitions) == [0, 1, 2, 3]
        assert (tmp_path / "env-data" / "auto-0").is_dir()
    bad = subprocess.run([sys.executable, "-m", "cli", "broker", "--override", f"log.dirs={tmp_path}/x"],
                         cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, check=False,
                         env={**os.environ, "MINIKAFKA_NUM_PARTITONS": "3"})
    assert bad.returncode == 1
    assert "Unknown configuration 'num.partitons' (from environment variable MINIKAFKA_NUM_PARTITONS)" in bad.stderr


def test_broker_log_lines_as_kafka_writes_them(broker_factory: Any) -> None:
    """WARN (not WARNING); no line per empty __consumer_offsets partition at coordinator start."""
    broker = broker_factory(env={"MINIKAFKA_LOG_LEVELS": "broker.server=LOUD"})
    with SyncClient(broker.bootstrap) as c:
        assert c.run(c.client.coordinator_for("some-group")) == 0
        c.run(c.groups.list_groups())
    text = broker.stderr_text()
    assert "] WARN MINIKAFKA_LOG_LEVELS: unknown level 'LOUD'" in text
    assert "WARNING" not in text
    assert (Path(broker.log_dir) / "__consumer_offsets-49").is_dir()  # all 50 partitions were loaded
    assert "loaded 0 groups" not in text
