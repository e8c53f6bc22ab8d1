"""Kafka topics in Spark: the ``minikafka`` data source and the bulk job.

    from spark_ingest import MinikafkaDataSource
    spark.dataSource.register(MinikafkaDataSource)
    spark.read.format("minikafka").option("kafka.bootstrap.servers", "h:p").option("subscribe", "t").load()

``MinikafkaDataSource`` (``spark_ingest.source``) and ``local_session``
(``spark_ingest.session``, which registers the source) are imported on first use, so the
modules that need no Spark (options, offsets, the client adapter) load without pyspark.
The bulk job is ``spark_ingest.bulk_consume`` (``minikafka spark-ingest``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["MinikafkaDataSource", "local_session"]


def __getattr__(name: str) -> Any:
    if name == "MinikafkaDataSource":
        from spark_ingest.source import MinikafkaDataSource

        return MinikafkaDataSource
    if name == "local_session":
        from spark_ingest.session import local_session

        return local_session
    raise AttributeError(f"module 'spark_ingest' has no attribute {name!r}")
