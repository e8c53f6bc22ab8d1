"""Produce and consume throughput over SASL_SSL against PLAINTEXT, for minikafka and Apache
Kafka on the same machine (the security issue's closing figures).

Each broker gets two listeners: PLAINTEXT and SASL_SSL (TLS with a PEM key store made at run
time, SASL/PLAIN). Kafka's own ProducerPerformance (acks=1, linger.ms=5, batch.size 1 MiB,
no compression) then ConsumerPerformance run against each listener in turn, on a fresh
topic each, ``--records`` records of ``--record-bytes``. Figures are MiB/s as the tools
print them; the machine's load average is printed before and after (a shared machine).

    .venv/bin/python -m bench.security_bench [--records 200000] [--record-bytes 1000]
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from bench.admin import create_topic
from bench.brokers import SubprocessBroker
from bench.java_perf import consumer_perf, producer_perf
from bench.kafka_broker import ApacheKafka
from bench.minikafka_broker import MiniKafka
from bench.procs import free_port
from tests.tls_certs import make_pki

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule required"
PLAIN_JAAS = f'{PLAIN_MODULE} username="bench" password="bench-secret" user_bench="bench-secret";'
CLIENT_JAAS = f'{PLAIN_MODULE} username="bench" password="bench-secret";'


def security_settings(pki_server_keystore: Path) -> dict[str, str]:
    return {
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki_server_keystore),
        "inter.broker.listener.name": "PLAINTEXT",
    }


def client_config(path: Path, ca: Path) -> Path:
    path.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
        f"sasl.jaas.config={CLIENT_JAAS}\n"
        f"ssl.truststore.type=PEM\nssl.truststore.location={ca}\n")
    return path


def run(broker: SubprocessBroker, endpoints: dict[str, str], work: Path, records: int,
        record_bytes: int, sasl_config: Path) -> list[str]:
    lines = []
    for protocol, bootstrap in endpoints.items():
        topic = f"sec-{protocol.lower()}"
        create_topic(endpoints["PLAINTEXT"], topic, 1)
        config = sasl_config if protocol == "SASL_SSL" else None
        produced = producer_perf(bootstrap, topic, records=records, record_bytes=record_bytes,
                                 work_dir=work, client_config=config)
        consumed = consumer_perf(bootstrap, topic, records=records, work_dir=work,
                                 client_config=config)
        lines.append(f"{broker.name:10s} {protocol:10s} produce {produced.mib_per_s:7.1f} MiB/s "
                     f"(p99 {produced.p99_ms:.0f} ms)  consume {consumed.mib_per_s:7.1f} MiB/s")
        print(lines[-1], flush=True)
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.security_bench")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--record-bytes", type=int, default=1000)
    parser.add_argument("--minikafka-only", action="store_true")
    parser.add_argument("--fetch-copy", action="store_true",
                        help="minikafka with MINIKAFKA_FETCH_COPY=1 (copies record data on "
                             "PLAINTEXT too: separates the copy's cost from TLS's)")
    args = parser.parse_args(argv)
    print(f"load before: {os.getloadavg()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="security-bench-") as tmp:
        work = Path(tmp)
        pki = make_pki(work / "pki", clients=())
        sasl_config = client_config(work / "sasl-ssl.properties", pki.ca_cert)
        # minikafka
        mk_plain, mk_sasl = free_port(), free_port()
        env = {"MINIKAFKA_FETCH_COPY": "1"} if args.fetch_copy else {}
        mini = MiniKafka(work / "minikafka", name="mk-copy" if args.fetch_copy else "minikafka",
                         env=env, settings={
            "listeners": f"PLAINTEXT://127.0.0.1:{mk_plain},SASL_SSL://127.0.0.1:{mk_sasl}",
            **security_settings(pki.server_keystore)})
        mini.port = mk_plain
        mini.launch()
        mini.wait_started()
        try:
            run(mini, {"PLAINTEXT": f"127.0.0.1:{mk_plain}", "SASL_SSL": f"127.0.0.1:{mk_sasl}"},
                work, args.records, args.record_bytes, sasl_config)
        finally:
            mini.stop()
        if args.minikafka_only:
            print(f"load after: {os.getloadavg()}", flush=True)
            return 0
        # Apache Kafka (KRaft combined mode)
        kafka = ApacheKafka(work / "kafka")
        k_sasl = free_port()
        kafka.settings = {
            "listeners": (f"PLAINTEXT://127.0.0.1:{kafka.port},SASL_SSL://127.0.0.1:{k_sasl},"
                          f"CONTROLLER://127.0.0.1:{kafka.controller_port}"),
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{kafka.port},SASL_SSL://127.0.0.1:{k_sasl}",
            **security_settings(pki.server_keystore),
        }
        kafka.launch()
        kafka.wait_started()
        try:
            run(kafka, {"PLAINTEXT": f"127.0.0.1:{kafka.port}", "SASL_SSL": f"127.0.0.1:{k_sasl}"},
                work, args.records, args.record_bytes, sasl_config)
        finally:
            kafka.stop()
    print(f"load after: {os.getloadavg()}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
