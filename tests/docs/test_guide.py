"""The user guide (docs/*.md): every code block of every page runs, in order, as a reader
would run it (tests/docs/guide_runner.py says how each kind of block is run and checked).
The Spark page runs as a Spark test (one session for its blocks)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.docs.guide_runner import DOCS, KNOWN, REPO, parse, run_page

pytestmark = pytest.mark.timeout(600)

PAGES = sorted(p.name for p in DOCS.glob("*.md"))
SPARK_PAGES = {"spark.md"}


@pytest.mark.parametrize("page", [p for p in PAGES if p not in SPARK_PAGES])
def test_page_runs(page: str, tmp_path: Path) -> None:
    run_page(DOCS / page, tmp_path)


@pytest.mark.spark
@pytest.mark.parametrize("page", sorted(SPARK_PAGES & set(PAGES)))
def test_spark_page_runs(page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its blocks share one Spark session (local[2]): what Spark needs on this machine, and
    a user's shell would have, is set first."""
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    _no_spark_jvm_in_this_process()
    run_page(DOCS / page, tmp_path)


def _no_spark_jvm_in_this_process() -> None:
    """A reader's fresh Python has no Spark yet: the page's session launches its JVM from
    the page's directory, where the page's relative paths (``lake``, ``stream-kafka``)
    resolve. A JVM an earlier test of this process left (a stopped session keeps PySpark's
    gateway: tests/integration/test_spark_source.py before this page, in one process, as on
    an xdist worker) would resolve them against the directory pytest started in: it is
    shut down first (PySpark has no public call for it)."""
    from pyspark import SparkContext

    if SparkContext._active_spark_context is not None:
        SparkContext._active_spark_context.stop()
    gateway = SparkContext._gateway
    if gateway is None:
        return
    gateway.shutdown()
    proc = getattr(gateway, "proc", None)  # the JVM, which exits when its stdin closes
    if proc is not None:
        proc.stdin.close()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=60)
    SparkContext._gateway = None
    SparkContext._jvm = None


def test_every_block_can_be_run() -> None:
    """Each block has a language the runner knows and the directive it needs (a block that
    could not run would otherwise be found only when its page runs)."""
    for page in PAGES:
        for block in parse(DOCS / page):
            assert block.lang in KNOWN, f"{block.where}: ```{block.lang}"
            if block.lang in ("json", "yaml"):
                assert "file" in block.options, f"{block.where}: needs file=NAME"
            if block.lang == "text":
                assert {"file", "output"} & set(block.options), f"{block.where}: file= or output"


def test_readme_links_every_page() -> None:
    readme = (REPO / "README.md").read_text()
    for page in PAGES:
        assert f"docs/{page}" in readme, f"README.md does not link docs/{page}"


def _table(text: str, header: str) -> list[list[str]]:
    """The rows of the Markdown table whose header line is ``header``."""
    lines = text.splitlines()
    start = lines.index(header) + 2  # header, then the |---| line
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_api_table_is_what_a_broker_advertises(kafka_broker: Any) -> None:
    """differences.md lists exactly the APIs and versions of a running broker's ApiVersions
    response, Kafka's own versions of each, and every other API as not implemented."""
    from client.sync import SyncClient
    from protocol.messages import API_NAMES, REQUESTS

    with SyncClient(kafka_broker.bootstrap, timeout_ms=30_000) as client:
        advertised = client.api_versions()
    want = [[API_NAMES[k], str(k), f"{lo}-{hi}",
             f"{REQUESTS[k].LOWEST_VERSION}-{REQUESTS[k].HIGHEST_VERSION}"]
            for k, (lo, hi) in sorted(advertised.items())]
    text = (DOCS / "differences.md").read_text()
    got = _table(text, "| API | Key | minikafka | Apache Kafka 3.9 |")
    assert got == want, "differences.md's table should be:\n" + "\n".join(
        "| " + " | ".join(row) + " |" for row in want)
    missing = _table(text, "| API | Key | What it means |")
    listed = {int(k) for row in missing for k in row[1].split(",")}
    names = {n.strip() for row in missing for n in row[0].split(",")}
    assert listed == set(API_NAMES) - set(advertised)
    assert names == {API_NAMES[k] for k in listed}
