"""A local Spark session set up for this project (tests, the bulk job, the benchmark).

``local_session(app_name, cores=2, kafka_jars=True)``: ``local[cores]`` on 127.0.0.1
(``SPARK_LOCAL_IP``), the venv's Python for the workers (``PYSPARK_PYTHON``), no UI, UTC
session time zone, few shuffle partitions, the ``minikafka`` source registered, and, with
``kafka_jars`` (True: required; None: when fetched), ``spark.jars`` set to Spark's Kafka
connector fetched by ``tools/fetch-spark-jars`` (so ``format("kafka")`` works too).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Final

from pyspark.sql import SparkSession

REPO_ROOT: Final = Path(__file__).resolve().parents[1]
SPARK_JARS_DIR: Final = REPO_ROOT / "tools" / "spark-jars" / "libs"


def kafka_connector_jars() -> list[Path]:
    """The jars of Spark's Kafka source; an error telling how to fetch them if missing."""
    jars = sorted(SPARK_JARS_DIR.glob("*.jar"))
    if not any(j.name.startswith("spark-sql-kafka-0-10") for j in jars):
        raise FileNotFoundError(
            f"Spark's Kafka connector is not in {SPARK_JARS_DIR}: run tools/fetch-spark-jars")
    return jars


def local_session(app_name: str, cores: int = 2, *, kafka_jars: bool | None = True,
                  extra_conf: dict[str, str] | None = None) -> SparkSession:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = (
        SparkSession.builder.master(f"local[{cores}]").appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", str(max(2, cores)))
        .config("spark.driver.memory", "1g")
        .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
    )
    # None: the connector when it has been fetched. A JVM gets its driver class path once,
    # so a session made later in the same process cannot add format("kafka") any more.
    if kafka_jars or (kafka_jars is None and any(SPARK_JARS_DIR.glob("spark-sql-kafka-0-10*.jar"))):
        builder = builder.config("spark.jars", ",".join(str(j) for j in kafka_connector_jars()))
    for key, value in (extra_conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    from spark_ingest.source import MinikafkaDataSource

    spark.dataSource.register(MinikafkaDataSource)
    return spark
