"""``minikafka topics`` end to end against a real broker: the first call goes through the
``minikafka topics`` entry point in a subprocess; the rest call ``cli.topics.main``
in-process (same code, same sockets, without paying the interpreter start each time)."""

from __future__ import annotations

import base64
import contextlib
import io
import re
import subprocess
import sys
import time
from typing import Any

import pytest

from cli import topics as topics_tool
from client.sync import SyncClient
from tests.integration.broker_process import REPO_ROOT

pytestmark = pytest.mark.timeout(90)


def topics_subprocess(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli", "topics", "--bootstrap-server", bootstrap, *args],
        capture_output=True, text=True, timeout=30, cwd=REPO_ROOT, check=False)


def topics(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err):
        code = topics_tool.main(["--bootstrap-server", bootstrap, *args], out=out)
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())


def test_create_list_describe_alter_delete(module_broker: Any) -> None:
    bs = module_broker.bootstrap
    made = topics_subprocess(bs, "--create", "--topic", "cli-a", "--partitions", "3",
                  "--replication-factor", "1", "--config", "retention.ms=60000",
                  "--config", "cleanup.policy=compact")
    assert (made.returncode, made.stdout) == (0, "Created topic cli-a.\n"), made.stderr
    assert topics(bs, "--create", "--topic", "cli-b").returncode == 0

    listed = topics(bs, "--list")
    assert listed.returncode == 0 and {"cli-a", "cli-b"} <= set(listed.stdout.split())
    assert topics(bs, "--list", "--topic", "cli-a").stdout == "cli-a\n"

    with SyncClient(bs) as admin:
        (meta,) = admin.describe_topics(["cli-a"])
    topic_id = base64.urlsafe_b64encode(meta.topic_id.bytes).decode().rstrip("=")
    described = topics(bs, "--describe", "--topic", "cli-a")
    assert described.returncode == 0, described.stderr
    lines = described.stdout.splitlines()
    assert lines[0] == (f"Topic: cli-a\tTopicId: {topic_id}\tPartitionCount: 3\tReplicationFactor: 1"
                        "\tConfigs: cleanup.policy=compact,retention.ms=60000")
    assert lines[1:] == [
        f"\tTopic: cli-a\tPartition: {p}\tLeader: 0\tReplicas: 0\tIsr: 0\tElr: N/A\tLastKnownElr: N/A"
        for p in range(3)]

    altered = topics(bs, "--alter", "--topic", "cli-a", "--partitions", "5",
                     "--config", "segment.ms=100000", "--delete-config", "cleanup.policy")
    assert altered.returncode == 0, altered.stderr
    head = topics(bs, "--describe", "--topic", "cli-a").stdout.splitlines()[0]
    assert "PartitionCount: 5" in head
    assert head.endswith("Configs: retention.ms=60000,segment.ms=100000")

    deleted = topics(bs, "--delete", "--topic", "cli-b")
    assert (deleted.returncode, deleted.stdout) == (0, "")
    assert "cli-b" not in topics(bs, "--list").stdout.split()


def test_errors_and_if_exists_flags(module_broker: Any) -> None:
    bs = module_broker.bootstrap
    assert topics(bs, "--create", "--topic", "cli-dup").returncode == 0
    again = topics(bs, "--create", "--topic", "cli-dup")
    assert again.returncode == 1
    assert "Error while executing topic command : Topic 'cli-dup' already exists." in again.stdout
    quiet = topics(bs, "--create", "--topic", "cli-dup", "--if-not-exists")
    assert (quiet.returncode, quiet.stdout) == (0, "")

    missing = topics(bs, "--describe", "--topic", "cli-nope")
    assert missing.returncode == 1
    assert "Topic 'cli-nope' does not exist as expected" in missing.stdout
    assert topics(bs, "--delete", "--topic", "cli-nope", "--if-exists").returncode == 0

    for args, message in [
        (("--create", "--topic", "cli rf", "--replication-factor", "1"), "illegal"),
        (("--create", "--topic", "cli-rf", "--replication-factor", "2"), "Replication factor"),
        (("--create", "--topic", "cli-cfg", "--config", "retention.ms=soon"), "retention.ms"),
        (("--create", "--topic", "cli-cfg", "--config", "retention.ms"), "key=val"),
        (("--alter", "--topic", "cli-dup", "--partitions", "1"), "partitions"),
    ]:
        failed = topics(bs, *args)
        assert failed.returncode == 1, args
        assert re.search(f"Error while executing topic command : .*{message}", failed.stdout), (
            args, failed.stdout)
    assert "cli-cfg" not in topics(bs, "--list").stdout.split()

    usage = topics(bs, "--list", "--describe")
    assert usage.returncode == 1 and "not allowed with" in usage.stderr


def test_unreachable_broker_fails_within_timeout() -> None:
    timeout_ms = 2000
    started = time.monotonic()
    result = topics("127.0.0.1:1", "--list", "--command-timeout-ms", str(timeout_ms))
    assert result.returncode == 1
    assert "Error while executing topic command" in result.stdout
    # It gave up at its timeout rather than retrying on (15x margin: a loaded machine).
    assert time.monotonic() - started < 15 * timeout_ms / 1000
