# One minikafka broker: the Kafka wire protocol on port 9092, data in the /data volume.
#   docker build -t minikafka .
#   docker run -p 9092:9092 -v minikafka-data:/data minikafka
# Set properties with more --override KEY=VALUE arguments (Kafka's property names), e.g.
#   docker run ... minikafka --override advertised.listeners=PLAINTEXT://myhost:9092
# Prometheus metrics, /health and /ready on port 9404 (off unless set):
#   docker run -p 9092:9092 -p 9404:9404 ... minikafka --override metrics.prometheus.listener=0.0.0.0:9404
FROM python:3.11-slim

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
COPY spark_ingest ./spark_ingest
RUN pip install --no-cache-dir . \
    && useradd --system --uid 1000 --user-group --home-dir /data --no-create-home minikafka \
    && mkdir -p /data \
    && chown minikafka /data

USER 1000:1000
VOLUME ["/data"]
EXPOSE 9092 9404

ENTRYPOINT ["minikafka", "broker", \
            "--override", "listeners=PLAINTEXT://0.0.0.0:9092", \
            "--override", "advertised.listeners=PLAINTEXT://localhost:9092", \
            "--override", "log.dirs=/data"]
