# minikafka images, two targets:
#   broker (default): one broker, the Kafka wire protocol on 9092, data in the /data volume.
#     docker build -t minikafka .
#     docker run -p 9092:9092 -v minikafka-data:/data minikafka
#   spark: the bulk job (minikafka spark-ingest) with Java and PySpark.
#     docker build --target spark -t minikafka-spark .
# Broker properties come from MINIKAFKA_* variables in the scheme of Kafka's images
# (KAFKA_LOG_DIRS -> log.dirs: "_" is ".", "__" is "_", "___" is "-"), e.g.
#   docker run -e MINIKAFKA_ADVERTISED_LISTENERS=PLAINTEXT://myhost:9092 ... minikafka
# or from --override KEY=VALUE arguments after the image name (they win over variables).
# In a cluster: MINIKAFKA_BROKER_ID=N and MINIKAFKA_ZOOKEEPER_CONNECT=zk:2181/minikafka
# (docker-compose.yml runs ZooKeeper and three brokers).
# Prometheus metrics, /health and /ready on port 9404 (off unless set):
#   docker run -p 9092:9092 -p 9404:9404 -e MINIKAFKA_METRICS_PROMETHEUS_LISTENER=0.0.0.0:9404 ... minikafka
FROM python:3.11-slim AS base

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

WORKDIR /opt/minikafka
COPY pyproject.toml README.md ./
COPY protocol ./protocol
COPY storage ./storage
COPY broker ./broker
COPY controller ./controller
COPY client ./client
COPY cli ./cli
COPY devcluster ./devcluster
COPY spark_ingest ./spark_ingest
RUN useradd --system --uid 1000 --user-group --home-dir /data --no-create-home minikafka \
    && mkdir -p /data \
    && chown minikafka /data

FROM base AS spark
# Debian's JRE for Spark (its version follows the base image; pinning it would break rebuilds);
# pip installs this project from its own source, not a package to pin.
# hadolint ignore=DL3008,DL3013
RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
    && rm -rf /var/lib/apt/lists/* \
    && pip install --no-cache-dir ".[spark]" \
    && mkdir -p /output \
    && chown minikafka /output
ENV SPARK_LOCAL_IP=127.0.0.1
USER 1000:1000
VOLUME ["/output"]
ENTRYPOINT ["minikafka", "spark-ingest"]

FROM base AS broker
RUN pip install --no-cache-dir .
ENV MINIKAFKA_LISTENERS=PLAINTEXT://0.0.0.0:9092 \
    MINIKAFKA_ADVERTISED_LISTENERS=PLAINTEXT://localhost:9092 \
    MINIKAFKA_LOG_DIRS=/data
USER 1000:1000
VOLUME ["/data"]
EXPOSE 9092 9404
ENTRYPOINT ["minikafka", "broker"]
